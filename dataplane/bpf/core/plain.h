/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The plain fast path: untagged Ethernet / IPv4 without options / UDP, TCP or SCTP, not a tunnel,
 * parsed at fixed offsets like the N3 layouts (core/n3.h, whose checks it shares). What a data
 * network sends a UPF's N6 interface looks like this, as does most traffic that is not tunnelled;
 * the staged parser would pay three stage calls for it. The same contract as parse_n3: on any doubt
 * the staged parser starts over (tests/dataplane/test_fast_path.py compares the two). */
#ifndef DPP_CORE_PLAIN_H
#define DPP_CORE_PLAIN_H

#include "core/n3.h"

/* Up to the ports of the L4 header: what the one bounds check covers. */
#define PLAIN_MIN_LEN (N3_UDP + 4)

/* A UDP destination port after which the staged parser parses a tunnel. */
static __always_inline bool plain_tunnel_port(__be16 dport)
{
	return dport == bpf_htons(DPP_PORT_VXLAN) || dport == bpf_htons(DPP_PORT_GENEVE) ||
	       dport == bpf_htons(DPP_PORT_GTPU);
}

/* True when the packet had the plain layout and *p now holds its key and layers (as the staged
 * parser would fill them); false, *p untouched, for the staged parser. */
static __always_inline bool parse_plain(struct xdp_md *ctx, struct dpp_parse *p)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	const struct ethhdr *eth = data;
	const struct iphdr *ip = data + N3_IP;
	const __be16 *ports = data + N3_UDP; /* UDP, TCP and SCTP all start with them */
	__u32 l4_len, ip_end;

	if (data + PLAIN_MIN_LEN > end || eth->h_proto != bpf_htons(ETH_P_IP) || !n3_ipv4_ok(ip))
		return false;
	l4_len = n3_l4_len(ip->protocol);
	if (!l4_len || (ip->protocol == IPPROTO_UDP && plain_tunnel_port(ports[1])))
		return false;
	ip_end = N3_IP + bpf_ntohs(ip->tot_len);
	if (ip_end > (__u32)(end - data) || N3_UDP + l4_len > ip_end)
		return false;
	n3_fill_ip(p, data, ip, ip->protocol);
	return true;
}

#endif /* DPP_CORE_PLAIN_H */
