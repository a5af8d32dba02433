/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* STEER: hand a flow to its CPU (CPUMAP); best effort: keep it on this CPU. A flow whose CPU is
 * overloaded or not in the set overflows to an alternative node group (nf/forward/). */
#ifndef DPP_NF_STEER_STEER_H
#define DPP_NF_STEER_STEER_H

#include "core/counters.h"
#include "core/outcome.h"
#include "nf/forward/forward.h"
#include "nf/steer/maps.h"
#include "nf/steer/meter.h"

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

#endif /* DPP_NF_STEER_STEER_H */
