/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Stream identification (IEEE 802.1CB clause 6): which stream a frame belongs to, by its
 * destination MAC address and VLAN (null stream identification, 6.4) or, failing that, by its IP
 * header (IP stream identification, 6.6: VLAN, addresses, DSCP, protocol, ports), read with the
 * shared parsers behind the R-tag if there is one. Exact matches: a parameter the standard lets a
 * stream leave out is not yet a wildcard here. */
#ifndef DPP_NF_FRER_IDENTIFY_H
#define DPP_NF_FRER_IDENTIFY_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "proto/ip.h"
#include "proto/l4.h"
#include "nf/frer/maps.h"
#include "nf/frer/rtag.h"

/* The stream handle of a parsed frame (`c` after its tags), 0 when it belongs to none; `kinds`
 * (enum dpp_frer_gate) the identifications to try: a lookup in an empty table costs its hash. */
static __always_inline __u32 frer_identify(struct xdp_md *ctx, const struct frer_frame *f, struct cursor *c,
					   __u32 kinds)
{
	struct dpp_frer_null_key null = { .vlan = f->vlan };
	void *data = (void *)(long)ctx->data;
	struct dpp_flow_key key = {};
	struct dpp_layers l = {};
	__u32 *stream;
	__u16 dport;

	if (data + ETH_ALEN > (void *)(long)ctx->data_end)
		return 0;
	__builtin_memcpy(null.dmac, data, ETH_ALEN);
	stream = kinds & DPP_FRER_GATE_NULL ? bpf_map_lookup_elem(&dpp_frer_null, &null) : NULL;
	if (stream)
		return *stream;
	if (!(kinds & DPP_FRER_GATE_IP) || !is_ip_proto(f->next) || parse_ip(c, f->next, &key, &l) || parse_l4(c, &key, &l, &dport))
		return 0;
	key.vlan = f->vlan;
	key.flags = 0; /* what the parsers learned beyond the identity */
	stream = bpf_map_lookup_elem(&dpp_frer_ip, &key);
	return stream ? *stream : 0;
}

#endif /* DPP_NF_FRER_IDENTIFY_H */
