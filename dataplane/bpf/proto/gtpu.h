/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* GTP-U (TS 29.281) with its extension header chain and the PDU Session Container (TS 38.415)
 * (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_GTPU_H
#define DPP_PROTO_GTPU_H

#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "proto/cursor.h"

#define GTP_TPDU 0xff
#define GTP_FLAGS_EXT_SEQ_PN 0x07
#define GTP_EXT_PDU_SESSION 0x85

struct gtpu_hdr {
	__u8 flags; /* version (3), PT, spare, E, S, PN */
	__u8 type;
	__be16 length;
	__be32 teid;
};

/* A T-PDU whose payload is not IP has no UE fields: the carrier's must not pass for them. */
static __always_inline void key_clear_ue(struct dpp_flow_key *key)
{
	key->family = key->proto = key->dscp = 0;
	__builtin_memset(key->src, 0, sizeof(key->src));
	__builtin_memset(key->dst, 0, sizeof(key->dst));
	key->sport = key->dport = 0;
}

/* One GTP-U extension header; a PDU Session Container (TS 38.415) yields QFI and direction.
 *
 * A G-PDU carries one PDU Session Container (TS 38.415 5.5.2.1/5.5.2.2 give each PDU one QFI); a
 * chain with more is malformed, yet common tunnel endpoints walk the chain in order and act on the
 * first container they meet, so the first one wins: a container appended further down the chain
 * cannot override the QoS flow the sender put first. */
static __always_inline int parse_gtpu_ext(struct cursor *c, struct dpp_flow_key *key, __u8 *next)
{
	__u8 *ext = c->pos, *end;
	__u32 len;

	/* TS 29.281 5.2.1: n * 4 octets, n >= 1. The 4 octets are checked before the length octet is
	 * judged: a length of 0 in fewer than 4 bytes is cut short first, trunc_gtp, not bad_gtp. */
	if (!cursor_has(c, 4)) /* length, at least two bytes of content, next type */
		return DPP_REASON_TRUNC_GTP;
	len = (__u32)ext[0] * 4;
	if (!len)
		return DPP_REASON_BAD_GTP;
	if (*next == GTP_EXT_PDU_SESSION && !(key->flags & DPP_KEY_GTP_QFI)) {
		key->flags |= DPP_KEY_GTP_QFI;
		key->flags &= ~DPP_KEY_GTP_UL;
		key->qfi = ext[2] & 0x3f;
		if ((ext[1] >> 4) == 1)
			key->flags |= DPP_KEY_GTP_UL;
	}
	/* The end first, the last octet read back from it: 6.1's verifier (Debian 12) learns no lower
	 * bound from the test for zero above, so there len - 1 would wrap and the bounds check bound
	 * nothing. */
	end = (__u8 *)c->pos + len;
	if ((void *)end > c->end || (void *)end > c->stop)
		return DPP_REASON_TRUNC_GTP;
	*next = end[-1];
	c->pos = end;
	return 0;
}

/* The optional fields after the header of gtp (sequence number, N-PDU number, next extension
 * type), when its flags announce them, and the extension header chain they start. */
static __always_inline int parse_gtpu_exts(struct cursor *c, struct dpp_flow_key *key,
					   const struct gtpu_hdr *gtp)
{
	__u8 next = 0, *opt;
	int i, r;

	if (gtp->flags & GTP_FLAGS_EXT_SEQ_PN) {
		opt = c->pos;
		if (!cursor_has(c, 4)) /* sequence number, N-PDU number, next extension type */
			return DPP_REASON_TRUNC_GTP;
		next = (gtp->flags & 0x04) ? opt[3] : 0;
		c->pos += 4;
	}
	for (i = 0; i < DPP_MAX_GTP_EXT_HDRS && next; i++) {
		r = parse_gtpu_ext(c, key, &next);
		if (r)
			return r;
	}
	return next ? DPP_REASON_GTP_EXT_DEPTH : 0;
}

/* GTP-U (TS 29.281): header, optional fields, extension chain, then the message type. Returns
 * GTP_SIGNALLING for anything but a T-PDU; *ue_proto is the EtherType of the UE packet a T-PDU
 * carries, or 0 when its payload is not IP (Ethernet or unstructured PDU sessions): such a packet
 * is classified on the tunnel alone, its UE fields empty. */
static __always_inline int parse_gtpu(struct cursor *c, struct dpp_flow_key *key, __be16 *ue_proto)
{
	struct gtpu_hdr *gtp = c->pos;
	__u8 *ver;
	int r;

	if (!cursor_has(c, sizeof(*gtp)))
		return DPP_REASON_TRUNC_GTP;
	if ((gtp->flags >> 5) != 1 || !(gtp->flags & 0x10))
		return DPP_REASON_BAD_GTP;
	c->pos = gtp + 1;

	r = parse_gtpu_exts(c, key, gtp);
	if (r)
		return r;
	if (gtp->type != GTP_TPDU)
		return DPP_REASON_GTP_SIGNALLING;

	key->flags |= DPP_KEY_GTP;
	key->teid = bpf_ntohl(gtp->teid);
	ver = c->pos;
	if (!cursor_has(c, 1)) /* a T-PDU carries a packet */
		return DPP_REASON_TRUNC_GTP;
	*ue_proto = 0;
	if ((*ver >> 4) == 4)
		*ue_proto = bpf_htons(ETH_P_IP);
	else if ((*ver >> 4) == 6)
		*ue_proto = bpf_htons(ETH_P_IPV6);
	else
		key_clear_ue(key);
	return 0;
}

#endif /* DPP_PROTO_GTPU_H */
