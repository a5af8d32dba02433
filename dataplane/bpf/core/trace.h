/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The trace (loaded with trace on): the entry hands the packet's outcome over and tail-calls
 * dpp_xdp_trace, which records it in dpp_trace and gives the packet its verdict. The model of a
 * program in dpp_progs: what it needs comes through dpp_handover, and it returns the verdict. */
#ifndef DPP_CORE_TRACE_H
#define DPP_CORE_TRACE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "core/maps.h"
#include "core/outcome.h"
#include "core/counters.h"

/* Hand the outcome to dpp_xdp_trace and run it in place of the rest of the entry. Returns only when
 * the slot is empty, and then the caller returns the verdict itself, untraced. */
static __always_inline void trace_hand_over(struct xdp_md *ctx, const struct dpp_flow_key *key,
					    const struct dpp_rule *rule, const struct dpp_outcome *o,
					    int verdict, bool fast)
{
	__u32 zero = 0;
	struct dpp_trace *t = bpf_map_lookup_elem(&dpp_handover, &zero);

	if (!t)
		return;
	t->verdict = verdict;
	t->action = o->action;
	t->slot = rule ? rule->slot : DPP_NONE;
	t->cpu = o->cpu;
	t->reason = o->reason;
	t->alt_group = o->alt_group;
	t->alt_member = o->alt_member;
	t->egress_ifindex = o->egress_ifindex;
	t->key = *key;
	t->fast_path = fast;
	t->route_path = o->route_path;
	bpf_tail_call(ctx, &dpp_progs, DPP_PROG_TRACE);
}

SEC("xdp")
int dpp_xdp_trace(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct dpp_trace *t = bpf_map_lookup_elem(&dpp_handover, &zero);

	if (!t)
		return XDP_PASS; /* an array slot always exists; this satisfies the verifier */
	count(&dpp_prog_stats, DPP_PROG_TRACE, ctx->data_end - ctx->data);
	bpf_map_update_elem(&dpp_trace, &zero, t, BPF_ANY);
	return t->verdict;
}

#endif /* DPP_CORE_TRACE_H */
