/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The action dispatch: a matched rule's action, carried out by its stage act_<name>, generated from
 * the list of actions (DPP_ACTIONS, dpp/core/consts.h). Every stage takes a struct dpp_act_ctx,
 * returns an XDP verdict and fills struct dpp_outcome; the stages of PASS, DROP and DEFAULT are
 * here, the others in their network function's header (nf/<function>/), included below. */
#ifndef DPP_CORE_ACT_H
#define DPP_CORE_ACT_H

#include "core/outcome.h"

/* Never installed: a rule that says DEFAULT gets the configured verdict. Before the network
 * functions' headers: ATSSS's stage is this one (nf/atsss/act.h). */
static __always_inline int act_default(const struct dpp_act_ctx *a)
{
	return fallback(a->cfg, a->o, DPP_REASON_NONE);
}

#include "nf/steer/steer.h"
#include "nf/forward/forward.h"
#include "nf/redirect/redirect.h"
#include "nf/duplicate/duplicate.h"
#include "nf/upf/upf.h"
#include "nf/tunnel/tunnel.h"
#include "nf/atsss/act.h"
/* police() and the policers' maps, for the stages that police (the UPF's PDRs, through their QERs,
 * nf/upf/upf.h), and a rule's own policers (DPP_RULE_POLICED), before its action. */
#include "nf/qos/police.h"
#include "nf/qos/rule.h"

/* PASS; a best-effort rule's flows pass unless this CPU is overloaded (nf/steer/). */
static __always_inline int act_pass(const struct dpp_act_ctx *a)
{
	if (a->rule->flags & DPP_RULE_BEST_EFFORT)
		return best_effort(a, a->rule->overflow_group);
	a->o->action = DPP_ACTION_PASS;
	return XDP_PASS;
}

static __always_inline int act_drop(const struct dpp_act_ctx *a)
{
	a->o->action = DPP_ACTION_DROP;
	return XDP_DROP;
}

#define DPP_ACT_CASE(NAME, name)                                                                  \
	case DPP_ACTION_##NAME:                                                                  \
		return act_##name(a);

/* Carry out a matched rule, once its policers (DPP_RULE_POLICED, nf/qos/rule.h) let the packet
 * through (or, with a->rule NULL, the best-effort treatment of unmatched traffic; the UPF's packets
 * that matched none of its rules go back to it). */
static __always_inline int act(const struct dpp_act_ctx *a)
{
	if (!a->rule)
		return (a->key->flags & DPP_KEY_UPF) ? act_upf(a) : best_effort(a, DPP_NONE);
	if ((a->rule->flags & DPP_RULE_POLICED) && !rule_police(a->rule->slot, a->bytes, 0))
		return rule_policed(a->o);
	switch (a->rule->action) {
		DPP_ACTIONS(DPP_ACT_CASE)
	}
	return fallback(a->cfg, a->o, DPP_REASON_NONE);
}

#endif /* DPP_CORE_ACT_H */
