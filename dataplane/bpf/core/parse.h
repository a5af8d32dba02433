/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Header parsers of the pipeline, from Ethernet down to the UE packet inside GTP-U.
 *
 * Contract, shared by every parser here: a parser reads the header at the cursor, bounds-checks
 * every byte it reads against c->end and c->stop, advances the cursor past the header, and returns
 * 0, or a positive enum dpp_reason when the packet is truncated or malformed (the cursor is then
 * unspecified). Nothing is ever read past data_end, and no header is taken from past the end of the
 * datagram that carries it (c->stop): bytes after it are link padding, not headers. Numbers go into
 * the flow key in host order. A header both cut short and malformed gives the reason of the first
 * check it fails, in this order: bounds of its fixed part, validity of what that holds, bounds of
 * its variable part (tests/utils/refparser.py, decision 2, makes the same checks).
 */
#ifndef DPP_CORE_PARSE_H
#define DPP_CORE_PARSE_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"

struct cursor {
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
};

/* State handed from one parse stage to the next. Stages are BPF global functions, verified once
 * each rather than once per path through the packet, so they meet on an offset, not a pointer.
 * 8-byte aligned with the key first: the flow cache reads the key as 64-bit lanes (classify.h). */
struct dpp_parse {
	struct dpp_flow_key key;
	struct dpp_layers layers;
	__u16 off;   /* where the next header starts, from data */
	__be16 proto; /* EtherType of the next header; 0: nothing more to parse */
	__u16 dport; /* UDP destination port of the last parsed IP header, else 0 */
	__u16 stop;  /* c->stop from data: end of the innermost datagram (or UDP payload) so far */
} __attribute__((aligned(8)));

/* Linear XDP buffers end within a page; a stage starting beyond it finds a truncated packet. */
#define DPP_MAX_PARSE_OFFSET 4095

#define GTP_TPDU 0xff
#define GTP_FLAGS_EXT_SEQ_PN 0x07
#define GTP_EXT_PDU_SESSION 0x85
#define GRE_F_CSUM 0x8000
#define GRE_F_ROUTING 0x4000
#define GRE_F_KEY 0x2000
#define GRE_F_SEQ 0x1000
#define GRE_VERSION 0x0007
#define ETH_P_TEB 0x6558
#define IPV4_FRAG_OFFSET 0x1fff
#define VXLAN_F_I 0x08000000 /* RFC 7348: the VNI is valid */
#define SCTP_COMMON_HDR_LEN 12 /* RFC 9260: ports, verification tag, checksum */

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

struct vxlan_hdr {
	__be32 flags;
	__be32 vni; /* VNI in the top 24 bits */
};

struct geneve_hdr {
	__u8 ver_optlen; /* version (2 bits), option length in 4-byte words (6 bits) */
	__u8 flags;
	__be16 proto;
	__be32 vni; /* VNI in the top 24 bits */
};

struct gre_base {
	__be16 flags;
	__be16 proto;
};

struct gtpu_hdr {
	__u8 flags; /* version (3), PT, spare, E, S, PN */
	__u8 type;
	__be16 length;
	__be32 teid;
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

/* A cursor at p->off; false when that lies outside the packet's first page. */
static __always_inline bool cursor_at(struct xdp_md *ctx, const struct dpp_parse *p, struct cursor *c)
{
	__u32 off = p->off;

	if (off > DPP_MAX_PARSE_OFFSET)
		return false;
	barrier_var(off); /* keep the mask below: it is what bounds the pointer for the verifier */
	c->pos = (void *)(long)ctx->data + (off & DPP_MAX_PARSE_OFFSET);
	c->end = (void *)(long)ctx->data_end;
	c->stop = (void *)(long)ctx->data + p->stop; /* a __u16: within what the verifier allows */
	return true;
}

static __always_inline void cursor_save(struct xdp_md *ctx, const struct cursor *c,
					struct dpp_parse *p)
{
	p->off = c->pos - (void *)(long)ctx->data;
	p->stop = c->stop - (void *)(long)ctx->data;
}

/* Before the first stage: nothing but the frame bounds the packet yet. */
static __always_inline void parse_start(struct xdp_md *ctx, struct dpp_parse *p)
{
	__u32 len = ctx->data_end - ctx->data;

	p->stop = len > 0xffff ? 0xffff : len;
}

static __always_inline bool is_ip_proto(__be16 proto)
{
	return proto == bpf_htons(ETH_P_IP) || proto == bpf_htons(ETH_P_IPV6);
}

static __always_inline bool is_vlan_proto(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
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

static __always_inline void key_set_ipv4(struct dpp_flow_key *key, const struct iphdr *iph)
{
	key->family = 4;
	key->proto = iph->protocol;
	key->dscp = iph->tos >> 2;
	key->src[0] = iph->saddr;
	key->dst[0] = iph->daddr;
	key->src[1] = key->src[2] = key->src[3] = 0;
	key->dst[1] = key->dst[2] = key->dst[3] = 0;
	key->sport = key->dport = 0;
}

/* A T-PDU whose payload is not IP has no UE fields: the carrier's must not pass for them. */
static __always_inline void key_clear_ue(struct dpp_flow_key *key)
{
	key->family = key->proto = key->dscp = 0;
	__builtin_memset(key->src, 0, sizeof(key->src));
	__builtin_memset(key->dst, 0, sizeof(key->dst));
	key->sport = key->dport = 0;
}

static __always_inline void key_set_ipv6(struct dpp_flow_key *key, const struct ipv6hdr *ip6)
{
	key->family = 6;
	key->dscp = (ip6->priority << 2) | (ip6->flow_lbl[0] >> 6);
	__builtin_memcpy(key->src, &ip6->saddr, sizeof(key->src));
	__builtin_memcpy(key->dst, &ip6->daddr, sizeof(key->dst));
	key->sport = key->dport = 0;
}

/* IPv4 with options. The frame (and any datagram around it) must hold the whole datagram (tot_len):
 * a shorter one is truncated. Later headers must lie within it. */
static __always_inline int parse_ipv4(struct cursor *c, struct dpp_flow_key *key, struct dpp_layers *l)
{
	struct iphdr *iph = c->pos;
	__u32 hdr_len, tot_len;

	if (!cursor_has(c, sizeof(*iph)))
		return DPP_REASON_TRUNC_IPV4;
	hdr_len = iph->ihl * 4;
	if (iph->version != 4 || hdr_len < sizeof(*iph))
		return DPP_REASON_BAD_IPV4;
	if (!cursor_has(c, hdr_len)) /* options cut short */
		return DPP_REASON_TRUNC_IPV4;
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < hdr_len)
		return DPP_REASON_BAD_IPV4;
	if (!cursor_has(c, tot_len))
		return DPP_REASON_TRUNC_IPV4;
	cursor_limit(c, tot_len);
	c->pos += hdr_len;

	key_set_ipv4(key, iph);
	l->l4_proto = iph->protocol;
	l->fragment = (iph->frag_off & bpf_htons(IPV4_FRAG_OFFSET)) != 0;
	return 0;
}

static __always_inline bool is_ipv6_ext(__u8 nexthdr)
{
	return nexthdr == IPPROTO_HOPOPTS || nexthdr == IPPROTO_ROUTING ||
	       nexthdr == IPPROTO_DSTOPTS || nexthdr == IPPROTO_FRAGMENT || nexthdr == IPPROTO_AH;
}

/* One IPv6 extension header; *nexthdr is updated, *fragment set for a non-first fragment. */
static __always_inline int parse_ipv6_ext(struct cursor *c, __u8 *nexthdr, __u8 *fragment)
{
	__u8 *h = c->pos;
	__u32 len;

	if (!cursor_has(c, 8)) /* every extension header is at least 8 bytes */
		return DPP_REASON_TRUNC_IPV6;
	if (*nexthdr == IPPROTO_FRAGMENT) {
		struct frag_hdr { __u8 nexthdr, reserved; __be16 frag_off; __be32 id; } *fh = c->pos;

		*fragment = (fh->frag_off & bpf_htons(0xfff8)) != 0;
		len = 8;
	} else if (*nexthdr == IPPROTO_AH) {
		len = ((__u32)h[1] + 2) * 4;
	} else {
		len = ((__u32)h[1] + 1) * 8;
	}
	if (!cursor_has(c, len))
		return DPP_REASON_TRUNC_IPV6;
	*nexthdr = h[0];
	c->pos += len;
	return 0;
}

static __always_inline int parse_ipv6(struct cursor *c, struct dpp_flow_key *key, struct dpp_layers *l)
{
	struct ipv6hdr *ip6 = c->pos;
	__u8 nexthdr;
	int i, r;

	if (!cursor_has(c, sizeof(*ip6)))
		return DPP_REASON_TRUNC_IPV6;
	if (ip6->version != 6)
		return DPP_REASON_BAD_IPV6;
	if (!cursor_has(c, sizeof(*ip6) + bpf_ntohs(ip6->payload_len)))
		return DPP_REASON_TRUNC_IPV6;
	cursor_limit(c, sizeof(*ip6) + bpf_ntohs(ip6->payload_len));
	c->pos = ip6 + 1;
	key_set_ipv6(key, ip6);

	nexthdr = ip6->nexthdr;
	l->fragment = 0;
	for (i = 0; i < DPP_MAX_IPV6_EXT_HDRS; i++) {
		if (!is_ipv6_ext(nexthdr) || l->fragment)
			break;
		r = parse_ipv6_ext(c, &nexthdr, &l->fragment);
		if (r)
			return r;
	}
	if (is_ipv6_ext(nexthdr) && !l->fragment)
		return DPP_REASON_IPV6_EXT_DEPTH;
	key->proto = nexthdr;
	l->l4_proto = nexthdr;
	return 0;
}

static __always_inline int parse_ip(struct cursor *c, __be16 proto, struct dpp_flow_key *key,
				    struct dpp_layers *l)
{
	if (proto == bpf_htons(ETH_P_IP))
		return parse_ipv4(c, key, l);
	return parse_ipv6(c, key, l);
}

/* The L4 header of the most recently parsed IP header: ports (ICMP: type and code) into the key. A
 * non-first fragment has none. *udp_dport is the UDP destination port, 0 for anything else; a
 * tunnel after UDP lies within the UDP length (one under 8 leaves no payload). */
static __always_inline int parse_l4(struct cursor *c, struct dpp_flow_key *key,
				    const struct dpp_layers *l, __u16 *udp_dport)
{
	__u32 len;

	*udp_dport = 0;
	if (l->fragment) {
		key->flags |= DPP_KEY_FRAGMENT;
		return 0;
	}
	switch (l->l4_proto) {
	case IPPROTO_UDP: {
		struct udphdr *udp = c->pos;

		if (!cursor_has(c, sizeof(*udp)))
			return DPP_REASON_TRUNC_L4;
		len = bpf_ntohs(udp->len);
		cursor_limit(c, len > sizeof(*udp) ? len : sizeof(*udp));
		c->pos = udp + 1;
		key->sport = bpf_ntohs(udp->source);
		key->dport = *udp_dport = bpf_ntohs(udp->dest);
		return 0;
	}
	case IPPROTO_TCP: {
		struct tcphdr *tcp = c->pos;

		if (!cursor_has(c, sizeof(*tcp)))
			return DPP_REASON_TRUNC_L4;
		key->sport = bpf_ntohs(tcp->source);
		key->dport = bpf_ntohs(tcp->dest);
		return 0;
	}
	case IPPROTO_SCTP: {
		__be16 *ports = c->pos; /* the common header starts with them, as UDP and TCP do */

		if (!cursor_has(c, SCTP_COMMON_HDR_LEN))
			return DPP_REASON_TRUNC_L4;
		key->sport = bpf_ntohs(ports[0]);
		key->dport = bpf_ntohs(ports[1]);
		return 0;
	}
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6: {
		__u8 *icmp = c->pos;

		if (!cursor_has(c, 8)) /* type, code, checksum and the 4-byte rest of header */
			return DPP_REASON_TRUNC_L4;
		key->sport = icmp[0];
		key->dport = icmp[1];
		return 0;
	}
	}
	return 0;
}

static __always_inline int parse_vxlan(struct cursor *c, struct dpp_flow_key *key)
{
	struct vxlan_hdr *vx = c->pos;

	if (!cursor_has(c, sizeof(*vx)))
		return DPP_REASON_TRUNC_VXLAN;
	c->pos = vx + 1;
	key->overlay = DPP_OVERLAY_VXLAN;
	/* Without I the VNI field is reserved, whatever it holds. */
	if (vx->flags & bpf_htonl(VXLAN_F_I)) {
		key->vni = bpf_ntohl(vx->vni) >> 8;
		key->flags |= DPP_KEY_VNI;
	}
	return 0;
}

/* GENEVE: options are skipped by their length. *inner is the EtherType of what follows. */
static __always_inline int parse_geneve(struct cursor *c, struct dpp_flow_key *key, __be16 *inner)
{
	struct geneve_hdr *gn = c->pos;
	__u32 len;

	if (!cursor_has(c, sizeof(*gn)))
		return DPP_REASON_TRUNC_GENEVE;
	if (gn->ver_optlen >> 6)
		return DPP_REASON_BAD_GENEVE;
	len = sizeof(*gn) + (gn->ver_optlen & 0x3f) * 4;
	if (!cursor_has(c, len))
		return DPP_REASON_TRUNC_GENEVE;
	c->pos += len;
	*inner = gn->proto;
	key->overlay = DPP_OVERLAY_GENEVE;
	key->vni = bpf_ntohl(gn->vni) >> 8;
	key->flags |= DPP_KEY_VNI;
	if (*inner != bpf_htons(ETH_P_TEB) && *inner != bpf_htons(ETH_P_IP) &&
	    *inner != bpf_htons(ETH_P_IPV6))
		return DPP_REASON_BAD_GENEVE;
	return 0;
}

/* GRE (RFC 2784/2890): checksum, key and sequence are optional; the key is the overlay id, and
 * "no key" stays apart from key 0 (RFC 2890 section 2.1). */
static __always_inline int parse_gre(struct cursor *c, struct dpp_flow_key *key, __be16 *inner)
{
	struct gre_base *gre = c->pos;
	__u16 flags;
	__u32 len;
	__be32 *opt;

	if (!cursor_has(c, sizeof(*gre)))
		return DPP_REASON_TRUNC_GRE;
	flags = bpf_ntohs(gre->flags);
	if ((flags & GRE_VERSION) || (flags & GRE_F_ROUTING))
		return DPP_REASON_BAD_GRE;
	*inner = gre->proto;
	len = sizeof(*gre) + ((flags & GRE_F_CSUM) ? 4 : 0);
	opt = c->pos + len;
	len += ((flags & GRE_F_KEY) ? 4 : 0) + ((flags & GRE_F_SEQ) ? 4 : 0);
	if (!cursor_has(c, len))
		return DPP_REASON_TRUNC_GRE;
	if (flags & GRE_F_KEY) {
		if ((void *)(opt + 1) > c->end)
			return DPP_REASON_TRUNC_GRE;
		key->vni = bpf_ntohl(*opt);
		key->flags |= DPP_KEY_VNI;
	}
	c->pos += len;
	key->overlay = DPP_OVERLAY_GRE;
	if (*inner != bpf_htons(ETH_P_TEB) && *inner != bpf_htons(ETH_P_IP) &&
	    *inner != bpf_htons(ETH_P_IPV6))
		return DPP_REASON_BAD_GRE;
	return 0;
}

/* One GTP-U extension header; a PDU Session Container (TS 38.415) yields QFI and direction.
 *
 * A G-PDU carries one PDU Session Container (TS 38.415 5.5.2.1/5.5.2.2 give each PDU one QFI); a
 * chain with more is malformed, yet common tunnel endpoints walk the chain in order and act on the
 * first container they meet, so the first one wins: a container appended further down the chain
 * cannot override the QoS flow the sender put first. */
static __always_inline int parse_gtpu_ext(struct cursor *c, struct dpp_flow_key *key, __u8 *next)
{
	__u8 *ext = c->pos, *last;
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
	last = c->pos + (len - 1);
	if ((void *)(last + 1) > c->end || (void *)(last + 1) > c->stop)
		return DPP_REASON_TRUNC_GTP;
	*next = *last;
	c->pos = last + 1;
	return 0;
}

/* GTP-U (TS 29.281): header, optional fields, extension chain, then the message type. Returns
 * GTP_SIGNALLING for anything but a T-PDU; *ue_proto is the EtherType of the UE packet a T-PDU
 * carries, or 0 when its payload is not IP (Ethernet or unstructured PDU sessions): such a packet
 * is classified on the tunnel alone, its UE fields empty. */
static __always_inline int parse_gtpu(struct cursor *c, struct dpp_flow_key *key, __be16 *ue_proto)
{
	struct gtpu_hdr *gtp = c->pos;
	__u8 next = 0, *opt, *ver;
	int i, r;

	if (!cursor_has(c, sizeof(*gtp)))
		return DPP_REASON_TRUNC_GTP;
	if ((gtp->flags >> 5) != 1 || !(gtp->flags & 0x10))
		return DPP_REASON_BAD_GTP;
	c->pos = gtp + 1;

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
	if (next)
		return DPP_REASON_GTP_EXT_DEPTH;
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

/* The N3 fast path.
 *
 * An N3-facing node sees one layout far more than any other: untagged Ethernet / IPv4 / UDP 4789 /
 * VXLAN with a VNI / Ethernet / IPv4 / UDP 2152 / GTP-U T-PDU carrying one PDU Session Container
 * (or no extension at all) / UE IPv4 / UDP, TCP or SCTP, every IPv4 header without options. The
 * staged parser pays for its generality on each of those packets: seven stage calls, a bounds check
 * per header, offsets carried from stage to stage. In this layout every header sits at a fixed
 * offset, so one bounds check covers them all and every check the staged parser makes becomes a
 * compare with a constant (or, for the length fields, of numbers already loaded). The fast path only ever says "mine, and here is the key" or "not mine": on any doubt
 * the packet is parsed again from its first byte by the staged parser, so correctness never rests
 * on the fast path, which must only never accept a packet that the staged parser would parse
 * differently (tests/dataplane/test_fast_path.py holds it to that). */

/* Offsets of the layout's headers from the start of the frame. */
#define N3_IP (sizeof(struct ethhdr))
#define N3_UDP (N3_IP + sizeof(struct iphdr))
#define N3_VXLAN (N3_UDP + sizeof(struct udphdr))
#define N3_INNER_ETH (N3_VXLAN + sizeof(struct vxlan_hdr))
#define N3_INNER_IP (N3_INNER_ETH + sizeof(struct ethhdr))
#define N3_INNER_UDP (N3_INNER_IP + sizeof(struct iphdr))
#define N3_GTP (N3_INNER_UDP + sizeof(struct udphdr))
#define N3_GTP_OPT (N3_GTP + sizeof(struct gtpu_hdr)) /* sequence, N-PDU number, next type */
#define N3_PSC (N3_GTP_OPT + 4)			       /* length 1, PDU type, QFI, next type 0 */
#define N3_UE_PSC (N3_PSC + 4)			       /* the UE packet after the container */
#define N3_UE_PLAIN N3_GTP_OPT			       /* the UE packet without extension */
/* What each layout needs up to the UE's UDP header (or the ports of its TCP header): the length the
 * bounds check covers. The header fields the fast path reads before it knows the layout (through
 * the container, at N3_UE_PSC) all lie within the shorter one. */
#define N3_UE_LEN (sizeof(struct iphdr) + sizeof(struct udphdr))
#define N3_MIN_LEN (N3_UE_PLAIN + N3_UE_LEN)
_Static_assert(N3_UE_PSC <= N3_MIN_LEN, "the container lies within the shorter layout");

#define GTP_FLAGS_V1_PT 0x30 /* version 1, protocol type GTP; the spare bit 0x08 is not checked */
#define GTP_FLAGS_E 0x04
#define IPV4_VERSION_IHL5 0x45

/* An IPv4 header the staged parser would take as a whole datagram: version 4, IHL 5, not a
 * non-first fragment. Its total length is checked with the others (n3_lengths_ok). */
static __always_inline bool n3_ipv4_ok(const struct iphdr *ip)
{
	return *(const __u8 *)ip == IPV4_VERSION_IHL5 &&
	       !(ip->frag_off & bpf_htons(IPV4_FRAG_OFFSET));
}

/* The two tunnels: IPv4/UDP to the VXLAN port with a VNI, and after VXLAN an untagged IPv4/UDP to
 * GTP-U. */
static __always_inline bool n3_tunnels_ok(void *data)
{
	const struct ethhdr *eth = data, *inner_eth = data + N3_INNER_ETH;
	const struct iphdr *ip = data + N3_IP, *inner_ip = data + N3_INNER_IP;
	const struct udphdr *udp = data + N3_UDP, *inner_udp = data + N3_INNER_UDP;
	const struct vxlan_hdr *vx = data + N3_VXLAN;

	return eth->h_proto == bpf_htons(ETH_P_IP) && n3_ipv4_ok(ip) &&
	       ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(DPP_PORT_VXLAN) &&
	       (vx->flags & bpf_htonl(VXLAN_F_I)) &&
	       inner_eth->h_proto == bpf_htons(ETH_P_IP) && n3_ipv4_ok(inner_ip) &&
	       inner_ip->protocol == IPPROTO_UDP && inner_udp->dest == bpf_htons(DPP_PORT_GTPU);
}

/* What the staged parser requires of a UE L4 header: its length, or 0 for a protocol the fast path
 * leaves to it. */
static __always_inline __u32 n3_l4_len(__u8 proto)
{
	switch (proto) {
	case IPPROTO_UDP:
		return sizeof(struct udphdr);
	case IPPROTO_TCP:
		return sizeof(struct tcphdr);
	case IPPROTO_SCTP:
		return SCTP_COMMON_HDR_LEN;
	}
	return 0;
}

/* The lengths, as the staged parser reads them (from data, in a frame of frame_len bytes): every
 * datagram ends within the frame and within the datagram and UDP payload around it, and the UE's
 * L4 header, up to l4_end, within the UE datagram. Total lengths of at least a header follow. */
static __always_inline bool n3_lengths_ok(void *data, __u32 frame_len, __u32 ue_off, __u32 l4_end)
{
	const struct iphdr *ip = data + N3_IP, *inner_ip = data + N3_INNER_IP, *ue = data + ue_off;
	const struct udphdr *udp = data + N3_UDP, *inner_udp = data + N3_INNER_UDP;
	__u32 outer_end = N3_IP + bpf_ntohs(ip->tot_len);
	__u32 inner_end = N3_INNER_IP + bpf_ntohs(inner_ip->tot_len);
	__u32 ue_end = ue_off + bpf_ntohs(ue->tot_len);

	return outer_end <= frame_len && inner_end <= outer_end &&
	       inner_end <= N3_UDP + bpf_ntohs(udp->len) && ue_end <= inner_end &&
	       ue_end <= N3_INNER_UDP + bpf_ntohs(inner_udp->len) && l4_end <= ue_end;
}

/* Where the UE packet of a GTP-U T-PDU starts: after exactly one PDU Session Container of 4 octets
 * that ends the chain (E set; S and PN only say their fields are there, which they are anyway with
 * E), or right after the header (E, S and PN clear). 0 for any other GTP-U message. */
static __always_inline __u32 n3_gtpu_ue_offset(void *data)
{
	const struct gtpu_hdr *gtp = data + N3_GTP;
	const __u8 *opt = data + N3_GTP_OPT, *psc = data + N3_PSC;

	if ((gtp->flags & 0xf0) != GTP_FLAGS_V1_PT || gtp->type != GTP_TPDU)
		return 0;
	if (!(gtp->flags & GTP_FLAGS_EXT_SEQ_PN))
		return N3_UE_PLAIN;
	if ((gtp->flags & GTP_FLAGS_E) && opt[3] == GTP_EXT_PDU_SESSION && psc[0] == 1 && psc[3] == 0)
		return N3_UE_PSC;
	return 0;
}

/* The key and layers the staged parser would produce for this layout. p is still as the caller
 * zeroed it: only what is not 0 is written. */
static __always_inline void n3_fill(struct dpp_parse *p, void *data, const struct iphdr *ue,
				    bool psc)
{
	const struct vxlan_hdr *vx = data + N3_VXLAN;
	const struct gtpu_hdr *gtp = data + N3_GTP;
	const __u8 *container = data + N3_PSC;
	const __be16 *ports = (const __be16 *)(ue + 1); /* UDP, TCP and SCTP all start with them */

	p->key.vni = bpf_ntohl(vx->vni) >> 8;
	p->key.overlay = DPP_OVERLAY_VXLAN;
	p->key.teid = bpf_ntohl(gtp->teid);
	p->key.flags = DPP_KEY_VNI | DPP_KEY_GTP;
	if (psc) {
		p->key.flags |= DPP_KEY_GTP_QFI;
		if ((container[1] >> 4) == 1)
			p->key.flags |= DPP_KEY_GTP_UL;
		p->key.qfi = container[2] & 0x3f;
	}
	key_set_ipv4(&p->key, ue);
	p->key.sport = bpf_ntohs(ports[0]);
	p->key.dport = bpf_ntohs(ports[1]);

	p->layers.outer_l3 = N3_IP;
	p->layers.outer_l4 = N3_UDP;
	p->layers.outer_family = 4;
	p->layers.outer_proto = IPPROTO_UDP;
	p->layers.l4_proto = ue->protocol;
}

/* The whole fast path: true when the packet had the N3 layout and *p now holds its key and layers;
 * false, with *p untouched, for the staged parser to start over. One bounds check covers the
 * layout; which of its two lengths applies is known once the GTP-U flags are read (within the
 * shorter one). The length fields then say whether the UE's whole L4 header is there: compares of
 * numbers already loaded, no further bounds check. */
static __always_inline bool parse_n3(struct xdp_md *ctx, struct dpp_parse *p)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 frame_len = end - data, ue_off, l4_len;
	const struct iphdr *ue;

	if (data + N3_MIN_LEN > end || !n3_tunnels_ok(data))
		return false;
	ue_off = n3_gtpu_ue_offset(data);
	if (!ue_off)
		return false;
	ue = data + ue_off;
	if ((void *)ue + N3_UE_LEN > end || !n3_ipv4_ok(ue))
		return false;
	l4_len = n3_l4_len(ue->protocol);
	if (!l4_len || !n3_lengths_ok(data, frame_len, ue_off, ue_off + sizeof(*ue) + l4_len))
		return false;
	n3_fill(p, data, ue, ue_off == N3_UE_PSC);
	return true;
}

/* Parse stages. Each starts at p->off, leaves p->off after what it parsed and returns 0 or a
 * reason, as the parsers above do. */

/* Ethernet and VLAN tags; the outermost Ethernet header (no IP parsed yet) records the VLAN id. */
__attribute__((noinline)) int dpp_stage_eth(struct xdp_md *ctx, struct dpp_parse *p)
{
	struct cursor c;
	int r;

	if (!p || !cursor_at(ctx, p, &c))
		return DPP_REASON_TRUNC_ETH;
	r = parse_eth(&c, &p->proto, p->key.family ? NULL : &p->key.vlan);
	cursor_save(ctx, &c, p);
	return r;
}

/* An IP header (p->proto) and its L4 header. The first one parsed is remembered as the outer
 * header, which FORWARD rewrites. */
__attribute__((noinline)) int dpp_stage_ip(struct xdp_md *ctx, struct dpp_parse *p)
{
	bool outer;
	struct cursor c;
	int r;

	if (!p)
		return DPP_REASON_TRUNC_IPV4;
	if (!cursor_at(ctx, p, &c))
		return p->proto == bpf_htons(ETH_P_IP) ? DPP_REASON_TRUNC_IPV4 : DPP_REASON_TRUNC_IPV6;
	outer = !p->layers.outer_family;
	if (outer)
		p->layers.outer_l3 = p->off;
	r = parse_ip(&c, p->proto, &p->key, &p->layers);
	if (r)
		return r;
	if (outer) {
		p->layers.outer_family = p->key.family;
		p->layers.outer_proto = p->layers.l4_proto;
		p->layers.outer_l4 = p->layers.fragment ? 0 : c.pos - (void *)(long)ctx->data;
	}
	r = parse_l4(&c, &p->key, &p->layers, &p->dport);
	cursor_save(ctx, &c, p);
	p->proto = 0;
	return r;
}

/* The overlay announced by the outer L4 header, if any: p->proto becomes the EtherType of what it
 * carries (transparent Ethernet bridging, IPv4 or IPv6), or stays 0. */
__attribute__((noinline)) int dpp_stage_overlay(struct xdp_md *ctx, struct dpp_parse *p)
{
	struct cursor c;
	int r;

	if (!p)
		return DPP_REASON_TRUNC_VXLAN;
	if (!cursor_at(ctx, p, &c))
		return DPP_REASON_TRUNC_VXLAN;
	p->proto = 0;
	if (p->layers.l4_proto == IPPROTO_GRE) {
		r = parse_gre(&c, &p->key, &p->proto);
	} else if (p->dport == DPP_PORT_VXLAN) {
		r = parse_vxlan(&c, &p->key);
		p->proto = bpf_htons(ETH_P_TEB);
	} else if (p->dport == DPP_PORT_GENEVE) {
		r = parse_geneve(&c, &p->key, &p->proto);
	} else {
		return 0;
	}
	cursor_save(ctx, &c, p);
	return r;
}

/* GTP-U; after a T-PDU, p->proto is the EtherType of the UE packet (0 when it is not IP). */
__attribute__((noinline)) int dpp_stage_gtpu(struct xdp_md *ctx, struct dpp_parse *p)
{
	struct cursor c;
	int r;

	if (!p || !cursor_at(ctx, p, &c))
		return DPP_REASON_TRUNC_GTP;
	r = parse_gtpu(&c, &p->key, &p->proto);
	cursor_save(ctx, &c, p);
	return r;
}

#endif /* DPP_CORE_PARSE_H */
