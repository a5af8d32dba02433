/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* FORWARD: send a flow to a member of an alternative node group, its destination MAC and outer
 * destination IP rewritten, back out of the ingress interface or out of the member's port. */
#ifndef DPP_NF_FORWARD_FORWARD_H
#define DPP_NF_FORWARD_FORWARD_H

#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include "core/csum.h"
#include "core/outcome.h"
#include "proto/cursor.h"
#include "nf/forward/maps.h"

/* Spreads flows over a group's members; one flow always hashes to the same member. */
static __always_inline __u32 flow_hash(const struct dpp_flow_key *key)
{
	__u32 h = key->teid ^ key->vni ^ key->proto;
	int i;

#pragma unroll
	for (i = 0; i < 4; i++)
		h ^= key->src[i] ^ key->dst[i];
	h ^= ((__u32)key->sport << 16) | key->dport;
	h *= 0x9e3779b1;
	return h ^ (h >> 16);
}

static __always_inline bool mac_is_zero(const __u8 *mac)
{
	const __u16 *w = (const __u16 *)mac;

	return !(w[0] | w[1] | w[2]);
}

static __always_inline void rewrite_eth(struct ethhdr *eth, const struct dpp_alt_member *m)
{
	if (!mac_is_zero(m->smac))
		__builtin_memcpy(eth->h_source, m->smac, ETH_ALEN);
	else
		__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, m->dmac, ETH_ALEN);
}

/* The outer L4 checksum covers the pseudo-header, so it changes with the destination address. */
static __always_inline void rewrite_l4_csum(void *data, void *end, const struct dpp_layers *l,
					    __u64 diff)
{
	void *l4;

	if (!l->outer_l4)
		return;
	l4 = data + bounded_offset(l->outer_l4);
	if (l->outer_proto == IPPROTO_UDP) {
		struct udphdr *udp = l4;

		if ((void *)(udp + 1) <= end)
			udp->check = csum_update_udp(udp->check, diff);
	} else if (l->outer_proto == IPPROTO_TCP) {
		struct tcphdr *tcp = l4;

		if ((void *)(tcp + 1) <= end)
			tcp->check = csum_update(tcp->check, diff);
	}
}

static __always_inline void rewrite_ip_dst(void *data, void *end, const struct dpp_layers *l,
					   const struct dpp_alt_member *m)
{
	void *l3;
	__u64 diff;

	l3 = data + bounded_offset(l->outer_l3);
	if (l->outer_family == 4 && m->has_ip4) {
		struct iphdr *iph = l3;

		if ((void *)(iph + 1) > end)
			return;
		diff = csum_diff_words(&iph->daddr, &m->addr4, 1);
		iph->daddr = m->addr4;
		iph->check = csum_update(iph->check, diff);
		rewrite_l4_csum(data, end, l, diff);
	} else if (l->outer_family == 6 && m->has_ip6) {
		struct ipv6hdr *ip6 = l3;

		if ((void *)(ip6 + 1) > end)
			return;
		diff = csum_diff_words((__u32 *)&ip6->daddr, m->addr6, 4);
		__builtin_memcpy(&ip6->daddr, m->addr6, sizeof(m->addr6));
		rewrite_l4_csum(data, end, l, diff);
	}
}

/* Forward to a member of an alternative group (DPP_NONE: the default group): rewrite the destination
 * MAC and outer destination IP, then bounce out of the ingress interface or redirect to the
 * member's port. Also where flows overflow to from other actions. */
static __always_inline int forward(const struct dpp_act_ctx *a, __u32 group)
{
	void *data = (void *)(long)a->ctx->data, *end = (void *)(long)a->ctx->data_end;
	const struct dpp_config *cfg = a->cfg;
	struct dpp_outcome *o = a->o;
	const struct dpp_alt_member *m;
	const struct dpp_alt_group *g;
	struct ethhdr *eth = data;
	__u32 idx;
	int verdict = XDP_TX;

	if (group == DPP_NONE)
		group = cfg->default_alt_group;
	g = bpf_map_lookup_elem(&dpp_alt_groups, &group);
	if (!g || !g->count)
		return fallback(cfg, o, DPP_REASON_NO_ALTERNATIVE);
	idx = flow_hash(a->key) % g->count;
	if (idx >= DPP_MAX_ALT_MEMBERS)
		return fallback(cfg, o, DPP_REASON_NO_ALTERNATIVE);
	/* The index as checked: clang may keep a copy in a stack slot from before the check, which
	 * 6.1's verifier does not tie to the register compared (6.18's does), and index by it. */
	barrier_var(idx);
	m = &g->members[idx];

	/* Redirect first: it only records the target, so a missing port leaves the packet intact. */
	if (m->ifindex && m->ifindex != a->ctx->ingress_ifindex) {
		verdict = bpf_redirect_map(&dpp_ports, m->ifindex, 0);
		if (verdict != XDP_REDIRECT)
			return fallback(cfg, o, DPP_REASON_PORT_UNAVAILABLE);
		o->egress_ifindex = m->ifindex;
	}
	if ((void *)(eth + 1) > end)
		return fallback(cfg, o, DPP_REASON_TRUNC_ETH);
	rewrite_eth(eth, m);
	rewrite_ip_dst(data, end, a->l, m);

	o->action = DPP_ACTION_FORWARD;
	o->alt_group = group;
	o->alt_member = idx;
	return verdict;
}

/* The FORWARD stage: the rule's arg is the group. */
static __always_inline int act_forward(const struct dpp_act_ctx *a)
{
	return forward(a, a->rule->arg);
}

#endif /* DPP_NF_FORWARD_FORWARD_H */
