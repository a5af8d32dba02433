/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* IPv6 and its extension headers (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_IPV6_H
#define DPP_PROTO_IPV6_H

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include "proto/cursor.h"

static __always_inline void key_set_ipv6(struct dpp_flow_key *key, const struct ipv6hdr *ip6)
{
	key->family = 6;
	key->dscp = (ip6->priority << 2) | (ip6->flow_lbl[0] >> 6);
	__builtin_memcpy(key->src, &ip6->saddr, sizeof(key->src));
	__builtin_memcpy(key->dst, &ip6->daddr, sizeof(key->dst));
	key->sport = key->dport = 0;
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

/* The extension headers' walk, handed to dpp_ipv6_ext_walk by offsets from data (a global function
 * takes no packet pointer). */
struct dpp_ipv6_ext {
	__u32 off;	/* in: the first extension header; out: what follows the last walked */
	__u32 stop;	/* in: the cursor's stop */
	__u8 nexthdr;	/* in: the IPv6 header's Next Header; out: the one after the last walked */
	__u8 fragment;	/* out: a non-first fragment */
	__u8 pad[2];
};

/* Where a walk may start (a linear XDP buffer ends within a page: this is never met) and how far
 * it may go: every header at its longest, 8 * 256 bytes. Both keep the cursor's pointers within
 * what the verifier tracks. */
#define DPP_IPV6_EXT_MAX_OFF 0x3fff
#define DPP_IPV6_EXT_MAX_LEN (DPP_MAX_IPV6_EXT_HDRS * 2048)

/* Up to DPP_MAX_IPV6_EXT_HDRS extension headers from e->off, stopping after a non-first
 * fragment's: 0, or the reason (more headers than that too). A global function, verified once:
 * inlined, each header's three lengths multiply the paths of everything after the IP header in
 * every program that parses one (the parser's stage, FRER's identification, ATSSS's frame). */
__attribute__((noinline)) int dpp_ipv6_ext_walk(struct xdp_md *ctx, struct dpp_ipv6_ext *e)
{
	void *data = (void *)(long)ctx->data;
	__u32 off, stop;
	struct cursor c;
	__u8 nexthdr;
	int i, r;

	if (!e || e->off > DPP_IPV6_EXT_MAX_OFF || e->stop > DPP_IPV6_EXT_MAX_OFF)
		return DPP_REASON_TRUNC_IPV6;
	off = e->off;
	stop = e->stop;
	barrier_var(off); /* keep the masks: they are what bound the pointers for the verifier */
	barrier_var(stop);
	c.ctx = ctx;
	c.pos = data + (off & DPP_IPV6_EXT_MAX_OFF);
	c.end = (void *)(long)ctx->data_end;
	c.stop = data + (stop & DPP_IPV6_EXT_MAX_OFF);
	nexthdr = e->nexthdr;
	e->fragment = 0;
	for (i = 0; i < DPP_MAX_IPV6_EXT_HDRS; i++) {
		if (!is_ipv6_ext(nexthdr) || e->fragment)
			break;
		r = parse_ipv6_ext(&c, &nexthdr, &e->fragment);
		if (r)
			return r;
	}
	if (is_ipv6_ext(nexthdr) && !e->fragment)
		return DPP_REASON_IPV6_EXT_DEPTH;
	e->nexthdr = nexthdr;
	e->off = c.pos - data;
	return 0;
}

/* The extension headers after the IPv6 header, walked apart (dpp_ipv6_ext_walk): *nexthdr becomes
 * the protocol after them, l->fragment says whether the packet is a non-first fragment. A packet
 * without any pays the one comparison the loop began with. */
static __always_inline int parse_ipv6_exts(struct cursor *c, __u8 *nexthdr, struct dpp_layers *l)
{
	struct dpp_ipv6_ext e = {};
	long off, stop;
	void *data;
	__u32 len;
	int r;

	l->fragment = 0;
	if (!is_ipv6_ext(*nexthdr))
		return 0;
	data = (void *)(long)c->ctx->data;
	off = c->pos - data;
	stop = c->stop - data;
	barrier_var(off); /* 64-bit differences: clang would narrow the pointers themselves */
	barrier_var(stop);
	e.off = off;
	e.stop = stop;
	e.nexthdr = *nexthdr;
	r = dpp_ipv6_ext_walk(c->ctx, &e);
	l->fragment = e.fragment; /* as far as the walk went, a fault's too */
	if (r)
		return r;
	len = e.off - (__u32)off;
	if (len > DPP_IPV6_EXT_MAX_LEN)
		return DPP_REASON_TRUNC_IPV6;
	c->pos += len;
	*nexthdr = e.nexthdr;
	return 0;
}

static __always_inline int parse_ipv6(struct cursor *c, struct dpp_flow_key *key, struct dpp_layers *l)
{
	struct ipv6hdr *ip6 = c->pos;
	__u8 nexthdr;
	int r;

	if (!cursor_has(c, sizeof(*ip6)))
		return DPP_REASON_TRUNC_IPV6;
	if (ip6->version != 6)
		return DPP_REASON_BAD_IPV6;
	if (!cursor_has(c, sizeof(*ip6) + length_ntohs(ip6->payload_len)))
		return DPP_REASON_TRUNC_IPV6;
	cursor_limit(c, sizeof(*ip6) + length_ntohs(ip6->payload_len));
	c->pos = ip6 + 1;
	key_set_ipv6(key, ip6);

	nexthdr = ip6->nexthdr;
	r = parse_ipv6_exts(c, &nexthdr, l);
	if (r)
		return r;
	key->proto = nexthdr;
	l->l4_proto = nexthdr;
	return 0;
}

#endif /* DPP_PROTO_IPV6_H */
