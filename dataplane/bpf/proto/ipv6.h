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

#endif /* DPP_PROTO_IPV6_H */
