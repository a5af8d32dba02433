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
static __always_inline int overflow(const struct dpp_act_ctx *a, __u32 group)
{
	int verdict = forward(a, group);

	if (a->o->action == DPP_ACTION_FORWARD)
		a->o->reason = DPP_REASON_CPU_OVERLOADED;
	return verdict;
}

/* A steer whose CPU is not in the set: the flow overflows as if the CPU were overloaded, since an
 * operator who named an alternative group wants the flow served somewhere, but it counts as
 * CPU_UNAVAILABLE; with no usable group, the default verdict, still CPU_UNAVAILABLE (the root
 * cause). A missing member port keeps its own reason. */
static __always_inline int unavailable(const struct dpp_act_ctx *a, __u32 group)
{
	int verdict = forward(a, group);

	if (a->o->action == DPP_ACTION_FORWARD || a->o->reason == DPP_REASON_NO_ALTERNATIVE)
		a->o->reason = DPP_REASON_CPU_UNAVAILABLE;
	return verdict;
}

/* The STEER stage: the rule's arg is the CPU; flows it cannot take go to its overflow group. */
static __always_inline int act_steer(const struct dpp_act_ctx *a)
{
	const struct dpp_rule *rule = a->rule;
	__u32 cpu_id = rule->arg;
	const struct dpp_cpu *cpu = bpf_map_lookup_elem(&dpp_cpus, &cpu_id);

	if (!cpu || !cpu->enabled)
		return unavailable(a, rule->overflow_group);
	if (cpu_overloaded(cpu_id, cpu, a->cfg))
		return overflow(a, rule->overflow_group);
	if (bpf_redirect_map(&dpp_cpu_map, cpu_id, 0) != XDP_REDIRECT)
		return unavailable(a, rule->overflow_group);
	/* Counted only here: overflow and fallbacks never reach the CPU, so they are not its load. */
	count(&dpp_cpu_stats, cpu_id, a->bytes);
	a->o->action = DPP_ACTION_STEER;
	a->o->cpu = cpu_id;
	return XDP_REDIRECT;
}

/* Best effort: processed here unless this CPU is overloaded, else overflow to group. */
static __always_inline int best_effort(const struct dpp_act_ctx *a, __u32 group)
{
	__u32 cpu_id = bpf_get_smp_processor_id();
	const struct dpp_cpu *cpu = bpf_map_lookup_elem(&dpp_cpus, &cpu_id);

	if (cpu && cpu_overloaded(cpu_id, cpu, a->cfg))
		return overflow(a, group);
	a->o->action = DPP_ACTION_PASS;
	return XDP_PASS;
}

#endif /* DPP_NF_STEER_STEER_H */
