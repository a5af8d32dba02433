/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The cursor every protocol parser of proto/ reads with, their shared contract, and what they learn
 * beyond the flow key.
 *
 * Contract, shared by every parser of proto/: a parser reads the header at the cursor, bounds-checks
 * every byte it reads against c->end and c->stop, advances the cursor past the header, and returns
 * 0, or a positive enum dpp_reason when the packet is truncated or malformed (the cursor is then
 * unspecified). Nothing is ever read past data_end, and no header is taken from past the end of the
 * datagram that carries it (c->stop): bytes after it are link padding, not headers. Numbers go into
 * the flow key in host order. A header both cut short and malformed gives the reason of the first
 * check it fails, in this order: bounds of its fixed part, validity of what that holds, bounds of
 * its variable part (tests/utils/refparser.py, decision 2, makes the same checks). Parsers are
 * stateless: they touch no map, only the cursor and what they are handed.
 */
#ifndef DPP_PROTO_CURSOR_H
#define DPP_PROTO_CURSOR_H

#include <stdbool.h>
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "dpp/core/structs.h"
#include "dpp/reasons.h"

struct cursor {
	struct xdp_md *ctx; /* the packet's: a global function of proto/ walks it apart (ipv6.h) */
	void *pos;
	void *end;  /* data_end: the bound the verifier knows */
	void *stop; /* where the innermost length seen so far says the packet ends (<= end) */
};

/* What the parser learned beyond the flow key: where the headers that actions rewrite are. */
struct dpp_layers {
	__u16 outer_l3; /* offset of the outermost IP header */
	__u16 outer_l4; /* offset of its L4 header; 0 when it has none (fragment, unknown proto) */
	__u8 outer_family;
	__u8 outer_proto;
	__u8 l4_proto;	/* L4 protocol of the most recently parsed IP header */
	__u8 fragment;	/* the most recently parsed IP header is a non-first fragment */
	__u16 l3;	/* offset of the most recently parsed IP header */
	__u16 tun_l3;	/* GTP-U: offset of the IP header that carries it (the UPF's N3 side) */
	__u16 gtp;	/* offset of the GTP-U header; 0 when there is none */
	__u16 ue_l3;	/* T-PDU: where the UE packet starts (after every extension header) */
};

/* The first check is the one the verifier needs; the second keeps padding out of the headers. */
static __always_inline bool cursor_has(const struct cursor *c, __u32 len)
{
	return c->pos + len <= c->end && c->pos + len <= c->stop;
}

/* Later headers lie within len bytes from the cursor (a length field says so), if tighter. */
static __always_inline void cursor_limit(struct cursor *c, __u32 len)
{
	if (c->pos + len < c->stop)
		c->stop = c->pos + len;
}

/* A header's 16-bit length field in host order, below 2^16 where the verifier sees it too: 6.1's
 * (Debian 12) knows nothing of a byte swap's result and refuses a packet pointer plus such a
 * number; the mask, kept by the barrier, bounds it there (one instruction). */
static __always_inline __u32 length_ntohs(__be16 field)
{
	__u32 len = bpf_ntohs(field);

	barrier_var(len);
	return len & 0xffff;
}

#endif /* DPP_PROTO_CURSOR_H */
