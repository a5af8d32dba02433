/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Actions: steer to a CPU, forward to an alternative node, redirect to a port, and the overload
 * decisions between them. Each returns an XDP verdict and fills struct dpp_outcome. */
#ifndef DPP_CORE_ACT_H
#define DPP_CORE_ACT_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/tcp.h>
#include "core/maps.h"
#include "core/parse.h"
#include "core/csum.h"
#include "core/counters.h"

/* Outer headers a rewrite can reach: offsets are masked to this power of two so the verifier sees
 * them bounded. Outer headers never lie deeper (parse.h stops IPv6 extension chains long before). */
#define DPP_MAX_HDR_OFFSET 1024

static __always_inline __u32 bounded_offset(__u32 off)
{
	barrier_var(off); /* keep clang from dropping the mask it can prove redundant */
	return off & (DPP_MAX_HDR_OFFSET - 1);
}

/* What happened to a packet: counted, and traced when tracing is on. */
struct dpp_outcome {
	__u32 action; /* enum dpp_action carried out */
	__u32 reason; /* enum dpp_reason, DPP_REASON_NONE when the rule was simply obeyed */
	__u32 cpu;
	__u32 alt_group;
	__u32 alt_member;
	__u32 egress_ifindex;
};

/* The configured verdict for packets we could not (or would not) handle. Only PASS or DROP. */
static __always_inline int fallback(const struct dpp_config *cfg, struct dpp_outcome *o, __u32 reason)
{
	o->action = DPP_ACTION_DEFAULT;
	o->reason = reason;
	return cfg->default_verdict == XDP_DROP ? XDP_DROP : XDP_PASS;
}

/* Packets a receiving CPU takes from a target's window budget at a time. */
static __always_inline __u64 meter_share_size(__u64 budget)
{
	__u64 share = budget / DPP_METER_SHARE_DIVISOR;

	if (share > DPP_METER_SHARE_MAX)
		return DPP_METER_SHARE_MAX;
	return share ? share : 1;
}

#define METER_TAKEN_MASK ((1ULL << DPP_METER_TAKEN_BITS) - 1)
#define METER_WINDOW_MASK ((1ULL << DPP_METER_WINDOW_BITS) - 1)
#define METER_CAS_TRIES 8

/* This CPU's new share: what is left of the budget, up to the share size. */
static __always_inline bool meter_grant(struct dpp_meter_share *mine, __u64 budget, __u64 taken,
					__u64 want)
{
	/* This packet is one of the share's packets. */
	mine->tokens = (budget - taken < want ? budget - taken : want) - 1;
	mine->exhausted = 0;
	return false;
}

static __always_inline bool meter_refused(struct dpp_meter_share *mine, bool exhausted)
{
	mine->tokens = 0;
	mine->exhausted = exhausted;
	return true;
}

/* Slow path of the meter: this CPU's share is used up or from an old window. Takes a new share of
 * the target's budget by compare-and-swap on the target's word, the only line receivers share.
 * Windows are fixed slots of time from the meter's origin, so every CPU agrees on which one a packet
 * is in. */
static __always_inline bool meter_take_share(struct dpp_cpu_meter *meter, struct dpp_meter_share *mine,
					     __u64 budget, __u64 now, const struct dpp_config *cfg)
{
	__u64 origin = meter->origin_ns, want = meter_share_size(budget), window, old, taken, tag;
	int i;

	if (budget > METER_TAKEN_MASK)
		budget = METER_TAKEN_MASK;
	window = now > origin ? (now - origin) / cfg->meter_window_ns : 0;
	tag = (window & METER_WINDOW_MASK) << DPP_METER_TAKEN_BITS;
	mine->window_end_ns = origin + (window + 1) * cfg->meter_window_ns;
	for (i = 0; i < METER_CAS_TRIES; i++) {
		old = *(volatile __u64 *)&meter->window_taken;
		taken = (old & ~METER_TAKEN_MASK) == tag ? old & METER_TAKEN_MASK : 0;
		if (taken >= budget)
			return meter_refused(mine, true);
		if (__sync_val_compare_and_swap(&meter->window_taken, old, tag | (taken + want)) == old)
			return meter_grant(mine, budget, taken, want);
	}
	/* Lost every race: overflow this one packet rather than admit it past the budget. */
	return meter_refused(mine, false);
}

/* Fixed-window meter of the packets given to a CPU, against its capacity; plus the control
 * plane's overload flag. The fast path touches only this receiving CPU's share, and not even the
 * clock (a clock read costs more than the rest of the meter in a VM): a share is spent wherever its
 * window ends, so a window may also take up to a share per receiving CPU from the one before. */
static __always_inline bool cpu_overloaded(__u32 cpu_id, const struct dpp_cpu *cpu,
					   const struct dpp_config *cfg)
{
	struct dpp_meter_share *mine;
	struct dpp_cpu_meter *meter;
	__u64 now;

	if (cpu->overloaded)
		return true;
	if (!cpu->window_budget || !cfg->meter_window_ns)
		return false;
	mine = bpf_map_lookup_elem(&dpp_meter_shares, &cpu_id);
	meter = bpf_map_lookup_elem(&dpp_cpu_meters, &cpu_id);
	if (!mine || !meter)
		return false;
	if (mine->tokens) {
		mine->tokens--;
		return false;
	}
	now = bpf_ktime_get_ns();
	if (now < mine->window_end_ns && mine->exhausted)
		return true;
	return meter_take_share(meter, mine, cpu->window_budget, now, cfg);
}

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

/* Forward to a member of an alternative group: rewrite the destination MAC and outer destination
 * IP, then bounce out of the ingress interface or redirect to the member's port. */
static __always_inline int forward(struct xdp_md *ctx, const struct dpp_flow_key *key,
				   const struct dpp_layers *l, __u32 group,
				   const struct dpp_config *cfg, struct dpp_outcome *o)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
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
	idx = flow_hash(key) % g->count;
	if (idx >= DPP_MAX_ALT_MEMBERS)
		return fallback(cfg, o, DPP_REASON_NO_ALTERNATIVE);
	m = &g->members[idx];

	/* Redirect first: it only records the target, so a missing port leaves the packet intact. */
	if (m->ifindex && m->ifindex != ctx->ingress_ifindex) {
		verdict = bpf_redirect_map(&dpp_ports, m->ifindex, 0);
		if (verdict != XDP_REDIRECT)
			return fallback(cfg, o, DPP_REASON_PORT_UNAVAILABLE);
		o->egress_ifindex = m->ifindex;
	}
	if ((void *)(eth + 1) > end)
		return fallback(cfg, o, DPP_REASON_TRUNC_ETH);
	rewrite_eth(eth, m);
	rewrite_ip_dst(data, end, l, m);

	o->action = DPP_ACTION_FORWARD;
	o->alt_group = group;
	o->alt_member = idx;
	return verdict;
}

/* Overflow: what a flow whose CPU is overloaded gets. */
static __always_inline int overflow(struct xdp_md *ctx, const struct dpp_flow_key *key,
				    const struct dpp_layers *l, __u32 group,
				    const struct dpp_config *cfg, struct dpp_outcome *o)
{
	int verdict = forward(ctx, key, l, group, cfg, o);

	if (o->action == DPP_ACTION_FORWARD)
		o->reason = DPP_REASON_CPU_OVERLOADED;
	return verdict;
}

/* A steer whose CPU is not in the set: the flow overflows as if the CPU were overloaded, since an
 * operator who named an alternative group wants the flow served somewhere, but it counts as
 * CPU_UNAVAILABLE; with no usable group, the default verdict, still CPU_UNAVAILABLE (the root
 * cause). A missing member port keeps its own reason. */
static __always_inline int unavailable(struct xdp_md *ctx, const struct dpp_flow_key *key,
				       const struct dpp_layers *l, __u32 group,
				       const struct dpp_config *cfg, struct dpp_outcome *o)
{
	int verdict = forward(ctx, key, l, group, cfg, o);

	if (o->action == DPP_ACTION_FORWARD || o->reason == DPP_REASON_NO_ALTERNATIVE)
		o->reason = DPP_REASON_CPU_UNAVAILABLE;
	return verdict;
}

/* Steer to the rule's CPU. bytes: the packet's length, for dpp_cpu_stats. */
static __always_inline int steer(struct xdp_md *ctx, const struct dpp_flow_key *key,
				 const struct dpp_layers *l, const struct dpp_rule *rule,
				 const struct dpp_config *cfg, __u64 bytes, struct dpp_outcome *o)
{
	__u32 cpu_id = rule->target;
	const struct dpp_cpu *cpu = bpf_map_lookup_elem(&dpp_cpus, &cpu_id);

	if (!cpu || !cpu->enabled)
		return unavailable(ctx, key, l, rule->alt_group, cfg, o);
	if (cpu_overloaded(cpu_id, cpu, cfg))
		return overflow(ctx, key, l, rule->alt_group, cfg, o);
	if (bpf_redirect_map(&dpp_cpu_map, cpu_id, 0) != XDP_REDIRECT)
		return unavailable(ctx, key, l, rule->alt_group, cfg, o);
	/* Counted only here: overflow and fallbacks never reach the CPU, so they are not its load. */
	count(&dpp_cpu_stats, cpu_id, bytes);
	o->action = DPP_ACTION_STEER;
	o->cpu = cpu_id;
	return XDP_REDIRECT;
}

/* Best effort: processed here unless this CPU is overloaded. */
static __always_inline int best_effort(struct xdp_md *ctx, const struct dpp_flow_key *key,
				       const struct dpp_layers *l, __u32 group,
				       const struct dpp_config *cfg, struct dpp_outcome *o)
{
	__u32 cpu_id = bpf_get_smp_processor_id();
	const struct dpp_cpu *cpu = bpf_map_lookup_elem(&dpp_cpus, &cpu_id);

	if (cpu && cpu_overloaded(cpu_id, cpu, cfg))
		return overflow(ctx, key, l, group, cfg, o);
	o->action = DPP_ACTION_PASS;
	return XDP_PASS;
}

static __always_inline int redirect(const struct dpp_rule *rule, const struct dpp_config *cfg,
				    struct dpp_outcome *o)
{
	if (bpf_redirect_map(&dpp_ports, rule->target, 0) != XDP_REDIRECT)
		return fallback(cfg, o, DPP_REASON_PORT_UNAVAILABLE);
	o->action = DPP_ACTION_REDIRECT;
	o->egress_ifindex = rule->target;
	return XDP_REDIRECT;
}

/* Carry out a matched rule (or, with rule NULL, the best-effort treatment of unmatched traffic).
 * bytes: the packet's length, measured once by the caller. */
static __always_inline int act(struct xdp_md *ctx, const struct dpp_flow_key *key,
			       const struct dpp_layers *l, const struct dpp_rule *rule,
			       const struct dpp_config *cfg, __u64 bytes, struct dpp_outcome *o)
{
	if (!rule)
		return best_effort(ctx, key, l, DPP_NONE, cfg, o);
	switch (rule->action) {
	case DPP_ACTION_PASS:
		if (rule->flags & DPP_RULE_BEST_EFFORT)
			return best_effort(ctx, key, l, rule->alt_group, cfg, o);
		o->action = DPP_ACTION_PASS;
		return XDP_PASS;
	case DPP_ACTION_DROP:
		o->action = DPP_ACTION_DROP;
		return XDP_DROP;
	case DPP_ACTION_STEER:
		return steer(ctx, key, l, rule, cfg, bytes, o);
	case DPP_ACTION_FORWARD:
		return forward(ctx, key, l, rule->alt_group, cfg, o);
	case DPP_ACTION_REDIRECT:
		return redirect(rule, cfg, o);
	}
	return fallback(cfg, o, DPP_REASON_NONE);
}

#endif /* DPP_CORE_ACT_H */
