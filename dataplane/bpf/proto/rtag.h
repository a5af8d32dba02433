/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The R-tag of IEEE 802.1CB (7.8), after the Ethernet header and its VLAN tags (proto/cursor.h has
 * the parsers' contract). */
#ifndef DPP_PROTO_RTAG_H
#define DPP_PROTO_RTAG_H

#include <bpf/bpf_endian.h>
#include "proto/cursor.h"
#include "dpp/nf/frer.h"

struct rtag {
	__be16 reserved;
	__be16 seq;
	__be16 next; /* the EtherType of what the tag carries */
};

/* When *proto announces an R-tag: its sequence number into *seq, *proto becomes what it carries,
 * *tagged true. 0, or DPP_REASON_TRUNC_ETH for a tag cut short. */
static __always_inline int parse_rtag(struct cursor *c, __be16 *proto, bool *tagged, __u16 *seq)
{
	struct rtag *tag = c->pos;

	*tagged = *proto == bpf_htons(DPP_FRER_RTAG_ETHERTYPE);
	if (!*tagged)
		return 0;
	if (!cursor_has(c, sizeof(*tag)))
		return DPP_REASON_TRUNC_ETH;
	c->pos = tag + 1;
	*seq = bpf_ntohs(tag->seq);
	*proto = tag->next;
	return 0;
}

#endif /* DPP_PROTO_RTAG_H */
