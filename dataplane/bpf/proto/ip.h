/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* IPv4 or IPv6, by the EtherType that announces it (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_IP_H
#define DPP_PROTO_IP_H

#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "proto/ipv4.h"
#include "proto/ipv6.h"

static __always_inline bool is_ip_proto(__be16 proto)
{
	return proto == bpf_htons(ETH_P_IP) || proto == bpf_htons(ETH_P_IPV6);
}

static __always_inline int parse_ip(struct cursor *c, __be16 proto, struct dpp_flow_key *key,
				    struct dpp_layers *l)
{
	if (proto == bpf_htons(ETH_P_IP))
		return parse_ipv4(c, key, l);
	return parse_ipv6(c, key, l);
}

#endif /* DPP_PROTO_IP_H */
