/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The action dispatch: a matched rule's action, carried out by its network function (nf/). Each
 * returns an XDP verdict and fills struct dpp_outcome. */
#ifndef DPP_CORE_ACT_H
#define DPP_CORE_ACT_H

#include "core/outcome.h"
#include "nf/steer/steer.h"
#include "nf/forward/forward.h"
#include "nf/redirect/redirect.h"

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
