/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Ethernet and 802.1Q/802.1ad VLAN tags (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_ETH_H
#define DPP_PROTO_ETH_H

#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "proto/cursor.h"

#define ETH_P_TEB 0x6558 /* transparent Ethernet bridging: Ethernet inside an overlay */

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

static __always_inline bool is_vlan_proto(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

/* The destination and source addresses into the Ethernet header at eth, as 16-bit words: a frame's
 * header starts at an even offset, and so must dmac and smac. memcpy into the header (a packed
 * struct) compiles to a load and a store a byte, 24 instructions where this takes 12. */
static __always_inline void eth_set_addrs(void *eth, const void *dmac, const void *smac)
{
	const __u16 *d = dmac, *s = smac;
	__u16 *h = eth;

	h[0] = d[0];
	h[1] = d[1];
	h[2] = d[2];
	h[3] = s[0];
	h[4] = s[1];
	h[5] = s[2];
}

/* Ethernet and up to DPP_MAX_VLAN_TAGS tags. *vlan gets the outermost VLAN id when vlan != NULL. */
static __always_inline int parse_eth(struct cursor *c, __be16 *proto, __u16 *vlan)
{
	struct ethhdr *eth = c->pos;
	struct vlan_tag *tag;
	int i;

	if (!cursor_has(c, sizeof(*eth)))
		return DPP_REASON_TRUNC_ETH;
	c->pos = eth + 1;
	*proto = eth->h_proto;

#pragma unroll
	for (i = 0; i < DPP_MAX_VLAN_TAGS; i++) {
		if (!is_vlan_proto(*proto))
			return 0;
		tag = c->pos;
		if (!cursor_has(c, sizeof(*tag)))
			return DPP_REASON_TRUNC_VLAN;
		c->pos = tag + 1;
		if (i == 0 && vlan)
			*vlan = bpf_ntohs(tag->tci) & 0x0fff;
		*proto = tag->proto;
	}
	return is_vlan_proto(*proto) ? DPP_REASON_VLAN_DEPTH : 0;
}

#endif /* DPP_PROTO_ETH_H */
