/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Stream identification (IEEE 802.1CB clause 6): which stream a frame belongs to, by its
 * destination MAC address and VLAN (null stream identification, 6.4: the frame's VLAN first, then
 * an identity of any VLAN) or, failing that, by its IP
 * header (IP stream identification, 6.6: VLAN, addresses, DSCP, protocol, ports), read with the
 * shared parsers behind the R-tag if there is one. An IP identity compares the fields its mask
 * keeps (dpp_frer_ip_masks): a parameter it leaves out matches any value, an address may be a
 * prefix. */
#ifndef DPP_NF_FRER_IDENTIFY_H
#define DPP_NF_FRER_IDENTIFY_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "proto/ip.h"
#include "proto/l4.h"
#include "nf/frer/maps.h"
#include "nf/frer/rtag.h"
#include "core/key.h"

/* The stream of an IP frame's key under the node's masks, most specific first (0: none). */
static __always_inline __u32 frer_identify_ip(const struct dpp_flow_key *key)
{
	struct dpp_flow_key masked, *mask;
	__u32 *stream;
	int i;

#pragma unroll /* a handful of slots: unrolled, each slot's lookup key is a constant */
	for (i = 0; i < DPP_FRER_IP_MASKS; i++) {
		__u32 slot = i;

		mask = bpf_map_lookup_elem(&dpp_frer_ip_masks, &slot);
		if (!mask || !mask->family)
			return 0;
		key_mask(&masked, key, mask);
		stream = bpf_map_lookup_elem(&dpp_frer_ip, &masked);
		if (stream)
			return *stream;
	}
	return 0;
}

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
	if (!stream && (kinds & DPP_FRER_GATE_NULL_ANY)) {
		null.vlan = DPP_FRER_VLAN_ANY;
		stream = bpf_map_lookup_elem(&dpp_frer_null, &null);
	}
	if (stream)
		return *stream;
	if (!(kinds & DPP_FRER_GATE_IP) || !is_ip_proto(f->next) || parse_ip(c, f->next, &key, &l) || parse_l4(c, &key, &l, &dport))
		return 0;
	key.vlan = f->vlan;
	return frer_identify_ip(&key);
}

#endif /* DPP_NF_FRER_IDENTIFY_H */
