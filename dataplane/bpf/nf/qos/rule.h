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

/* What a rule's policers do with a packet rule_police did not decide inline: policer `own`'s
 * decision on its shared state, for a packet its CPU's credit did not cover (`next`: what
 * police_share said of the carve), or, own 0 (none, or passed on its credit), `next` the policer
 * that follows (own's parent); then the rule's `shared` policer, on the chain's one clock reading
 * (`now`, 0: read by the first policer that decides, police_clock): police_at's order, readings and
 * counts for the own one, then for the shared one. A global function, in a frame of its own:
 * act()'s callers leave little of the 512 bytes of stack. */
__attribute__((noinline)) int dpp_police_rule(__u32 own, __u32 next, __u32 shared, __u32 bytes, __u64 now)
{
	struct dpp_policer *p = own ? bpf_map_lookup_elem(&dpp_policers, &own) : NULL;

	if (own) {
		if (!p || p->algo == DPP_POLICE_ALGO_NONE)
			return police_at(shared, bytes, &now, POLICE_WINDOW_CREDIT); /* emptied since */
		own = police_share_index(own);
		next = police_on_state(p, &own, bytes, &now, next, POLICE_WINDOW_CREDIT);
	}
	if (next == POLICE_DROPPED)
		return 0;
	if (next && police_step(&next, bytes, &now, POLICE_WINDOW_CREDIT) == POLICE_DROPPED)
		return 0;
	return police_at(shared, bytes, &now, POLICE_WINDOW_CREDIT);
}

/* Whether a packet of `bytes` at `now` (0: the clock, read once for all as a chain reads it, the
 * rule's own policer's: police_clock) passes the policers of rule slot `slot`: its own, then its
 * shared one; a slot past dpp_rule_policers polices nothing. The own policer's CPU credit is looked
 * at inline (police_share), so that a packet it covers, of a rule with no shared policer whose own
 * one has no parent (a rule with a police option: the common case), makes no call (a call costs
 * some 10 ns on this machine's kernel: bench/README.md, "A policed rule taken apart"); anything
 * else goes on in dpp_police_rule from where this left off, nothing done twice but the policer's
 * lookup. Only the credit inline: a policer's whole decision inline grows dpp_xdp's frame by 24 to
 * 48 bytes, and dpp_xdp's (the UPF inlined in it), dpp_upf_sdf's and dpp_upf_police's frames fill
 * the 512 bytes already, rounded to 32 as kernels before 6.9 count them (bench/stack.py). */
static __always_inline bool rule_police(__u32 slot, __u64 bytes, __u64 now)
{
	const struct dpp_rule_police *rp = bpf_map_lookup_elem(&dpp_rule_policers, &slot);
	struct dpp_policer *p;
	__u32 id, at, carve;

	if (!rp)
		return true;
	id = rp->policer;
	p = id ? bpf_map_lookup_elem(&dpp_policers, &id) : NULL;
	if (!p || p->algo == DPP_POLICE_ALGO_NONE)
		return !rp->shared || dpp_police_rule(0, 0, rp->shared, bytes, now);
	at = police_share_index(id);
	carve = police_share(p, &at, bytes, &now, POLICE_WINDOW_CREDIT);
	if (carve != POLICE_SPENT)
		return carve != POLICE_FULL && dpp_police_rule(id, carve, rp->shared, bytes, now);
	return (!p->parent && !rp->shared) || dpp_police_rule(0, p->parent, rp->shared, bytes, now);
}

/* The outcome of a packet its rule's policers dropped. */
static __always_inline int rule_policed(struct dpp_outcome *o)
{
	o->action = DPP_ACTION_DROP;
	o->reason = DPP_REASON_QOS_POLICED;
	return XDP_DROP;
}

#endif /* DPP_NF_QOS_RULE_H */
