/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* IPv4, options included (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_IPV4_H
#define DPP_PROTO_IPV4_H

#include <linux/in.h>
#include <linux/ip.h>
#include <bpf/bpf_endian.h>
#include "proto/cursor.h"

#define IPV4_FRAG_OFFSET 0x1fff

/* What an IPv4 header puts in a key that is not 0: a key zeroed before needs no more. */
static __always_inline void key_set_ipv4_fields(struct dpp_flow_key *key, const struct iphdr *iph)
{
	key->family = 4;
	key->proto = iph->protocol;
	key->dscp = iph->tos >> 2;
	key->src[0] = iph->saddr;
	key->dst[0] = iph->daddr;
}

static __always_inline void key_set_ipv4(struct dpp_flow_key *key, const struct iphdr *iph)
{
	key_set_ipv4_fields(key, iph);
	key->src[1] = key->src[2] = key->src[3] = 0;
	key->dst[1] = key->dst[2] = key->dst[3] = 0;
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
	tot_len = length_ntohs(iph->tot_len);
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

#endif /* DPP_PROTO_IPV4_H */
