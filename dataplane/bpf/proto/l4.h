/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The L4 headers whose ports (ICMP: type and code) go into the flow key: UDP, TCP, SCTP, ICMP and
 * ICMPv6 (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_L4_H
#define DPP_PROTO_L4_H

#include <linux/in.h>
#include <linux/in6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include <bpf/bpf_endian.h>
#include "proto/cursor.h"

#define SCTP_COMMON_HDR_LEN 12 /* RFC 9260: ports, verification tag, checksum */

/* UDP: a tunnel after it lies within the UDP length (one under 8 leaves no payload). */
static __always_inline int parse_udp(struct cursor *c, struct dpp_flow_key *key, __u16 *udp_dport)
{
	struct udphdr *udp = c->pos;
	__u32 len;

	if (!cursor_has(c, sizeof(*udp)))
		return DPP_REASON_TRUNC_L4;
	len = length_ntohs(udp->len);
	cursor_limit(c, len > sizeof(*udp) ? len : sizeof(*udp));
	c->pos = udp + 1;
	key->sport = bpf_ntohs(udp->source);
	key->dport = *udp_dport = bpf_ntohs(udp->dest);
	return 0;
}

static __always_inline int parse_tcp(struct cursor *c, struct dpp_flow_key *key)
{
	struct tcphdr *tcp = c->pos;

	if (!cursor_has(c, sizeof(*tcp)))
		return DPP_REASON_TRUNC_L4;
	key->sport = bpf_ntohs(tcp->source);
	key->dport = bpf_ntohs(tcp->dest);
	return 0;
}

static __always_inline int parse_sctp(struct cursor *c, struct dpp_flow_key *key)
{
	__be16 *ports = c->pos; /* the common header starts with them, as UDP and TCP do */

	if (!cursor_has(c, SCTP_COMMON_HDR_LEN))
		return DPP_REASON_TRUNC_L4;
	key->sport = bpf_ntohs(ports[0]);
	key->dport = bpf_ntohs(ports[1]);
	return 0;
}

/* ICMP and ICMPv6: type and code take the ports' places in the key. */
static __always_inline int parse_icmp(struct cursor *c, struct dpp_flow_key *key)
{
	__u8 *icmp = c->pos;

	if (!cursor_has(c, 8)) /* type, code, checksum and the 4-byte rest of header */
		return DPP_REASON_TRUNC_L4;
	key->sport = icmp[0];
	key->dport = icmp[1];
	return 0;
}

/* The L4 header of the most recently parsed IP header: ports (ICMP: type and code) into the key. A
 * non-first fragment has none. *udp_dport is the UDP destination port, 0 for anything else. */
static __always_inline int parse_l4(struct cursor *c, struct dpp_flow_key *key,
				    const struct dpp_layers *l, __u16 *udp_dport)
{
	*udp_dport = 0;
	if (l->fragment) {
		key->flags |= DPP_KEY_FRAGMENT;
		return 0;
	}
	switch (l->l4_proto) {
	case IPPROTO_UDP:
		return parse_udp(c, key, udp_dport);
	case IPPROTO_TCP:
		return parse_tcp(c, key);
	case IPPROTO_SCTP:
		return parse_sctp(c, key);
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		return parse_icmp(c, key);
	}
	return 0;
}

#endif /* DPP_PROTO_L4_H */
