/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A rule's policers: a matched rule with DPP_RULE_POLICED is policed before its action is carried
 * out (core/act.h), by the policers its slot names in dpp_rule_policers: its own (an intent's police
 * option), then the one it shares (its slice's MBR). A packet the first drops is not offered to
 * the second: the slice's policer counts what its rules' own policers let through, and a packet
 * its own policer passed and the slice's dropped has spent its own policer's room (no credit is
 * given back). Dropped: action DROP, reason qos_policed, counted by the policer that dropped it. */
#ifndef DPP_NF_QOS_RULE_H
#define DPP_NF_QOS_RULE_H

#include "core/outcome.h"
#include "nf/qos/police.h"

/* Whether a packet of `bytes` at `now` (0: the clock, read once for both as a chain reads it, the
 * rule's own policer's: police_clock) passes the policers of rule slot `slot`; a slot past
 * dpp_rule_policers polices nothing. */
static __always_inline bool rule_police(__u32 slot, __u64 bytes, __u64 now)
{
	const struct dpp_rule_police *rp = bpf_map_lookup_elem(&dpp_rule_policers, &slot);

	if (!rp)
		return true;
	return police_at(rp->policer, bytes, &now) && police_at(rp->shared, bytes, &now);
}

/* rule_police on the clock, in a frame of its own (a global function, as dpp_upf_police): act()'s
 * callers leave little of the 512 bytes of stack, and a rule without the flag never calls it. */
__attribute__((noinline)) int dpp_police_rule(__u32 slot, __u32 bytes)
{
	return rule_police(slot, bytes, 0);
}

/* The outcome of a packet its rule's policers dropped. */
static __always_inline int rule_policed(struct dpp_outcome *o)
{
	o->action = DPP_ACTION_DROP;
	o->reason = DPP_REASON_QOS_POLICED;
	return XDP_DROP;
}

#endif /* DPP_NF_QOS_RULE_H */
