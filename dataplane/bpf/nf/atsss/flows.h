/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Flows within a UE's downlink (MEC 015 MTS sessions with flow filters): a frame of a session
 * marked DPP_ATSSS_FLOW_RULES is looked up in the pipeline's classifier (core/classify.h: its
 * shapes, rules and per-rule counters), its key marked DPP_KEY_ATSSS, and the ATSSS
 * rule it matches gives the mode its flow runs (the rule's arg, an enum dpp_atsss_mode); no rule:
 * the session's own mode.
 *
 * Why the stage classifies, and not the entry before its hand-over: the hand-over happens before
 * the classifier for every ATSSS frame, and only the stage has read the session, whose flag says
 * whether the UE has flow rules at all; a session without them pays one test of a word its
 * scheduler reads anyway, where classifying in the entry would cost every ATSSS frame a search and
 * need the mode carried across the tail call. Why the shared classifier and a key bit, not a table
 * of ATSSS's own: the rules are written, counted, published and reconciled as every other
 * function's (netapp.service.function_rules, as the UPF's SDF filters are), and the bit keeps them
 * apart: every shape compares it, so an intent's rule never matches an ATSSS frame and an ATSSS
 * rule never matches another frame of the pipeline. A rule's key holds the UE's whole address as
 * its destination (netapp/atsss/flows.py): it can act on that UE's downlink only.
 *
 * Only the pipeline's stage (nf/atsss/stage.h) defines DPP_ATSSS_FLOWS: ATSSS alone (xdp_atsss)
 * has no classifier, and runs every frame in its session's mode. */
#ifndef DPP_NF_ATSSS_FLOWS_H
#define DPP_NF_ATSSS_FLOWS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "proto/cursor.h"
#include "proto/l4.h"
#include "core/parse.h"

/* What the downlink knows of a frame's flow: its key (the IP header's fields, read by the stage),
 * the cursor at its L4 header and its layers, for the ports read only when they are needed. */
struct atsss_flow {
	struct dpp_flow_key *key;
	struct cursor *c;
	const struct dpp_layers *l;
	__u64 bytes;
};

#ifdef DPP_ATSSS_FLOWS
#include "core/maps.h"
#include "core/classify.h"
#include "core/counters.h"

/* The mode of the classified key's ATSSS rule, counted on the rule's counter, or `mode` (the
 * session's) when it matched none (a global function: verified once, not in each of the stage's
 * ways to the schedulers). The shapes are searched without the flow cache (classify()): the
 * stage's frame and this one's must fit the 512 bytes of stack together, and the cache's copy of
 * a rule and its probe put them over (576 bytes, the verifier said). */
__attribute__((noinline)) int dpp_atsss_flow_rule(struct dpp_flow_key *key, __u32 mode, __u32 bytes)
{
	const struct dpp_shape_set *set;
	const struct dpp_config *cfg;
	const struct dpp_rule *rule;
	__u32 zero = 0, active;

	if (!key)
		return mode;
	cfg = bpf_map_lookup_elem(&dpp_config, &zero);
	if (!cfg)
		return mode;
	active = cfg->shape_set & 1;
	set = bpf_map_lookup_elem(&dpp_shapes, &active);
	if (!set)
		return mode;
	key->flags |= DPP_KEY_ATSSS;
	rule = search_shapes(key, set);
	if (!rule || rule->action != DPP_ACTION_ATSSS)
		return mode;
	count(&dpp_rule_stats, rule_stat_index(rule->slot), bytes);
	return rule->arg;
}

/* The mode of the frame's flow: its ports read (a frame whose L4 header is cut short keeps the
 * session's mode), then its ATSSS rule's. */
static __always_inline __u8 atsss_flow_mode(const struct atsss_flow *f, __u8 mode)
{
	__u16 udp_dport;

	if (parse_l4(f->c, f->key, f->l, &udp_dport))
		return mode;
	return dpp_atsss_flow_rule(f->key, mode, f->bytes);
}
#else
static __always_inline __u8 atsss_flow_mode(const struct atsss_flow *f __attribute__((unused)),
					    __u8 mode)
{
	return mode;
}
#endif

#endif /* DPP_NF_ATSSS_FLOWS_H */
