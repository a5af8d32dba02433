/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* REDIRECT: send the packet out of the rule's interface (DEVMAP). */
#ifndef DPP_NF_REDIRECT_REDIRECT_H
#define DPP_NF_REDIRECT_REDIRECT_H

#include "core/outcome.h"
#include "nf/redirect/maps.h"

static __always_inline int redirect(const struct dpp_rule *rule, const struct dpp_config *cfg,
				    struct dpp_outcome *o)
{
	if (bpf_redirect_map(&dpp_ports, rule->target, 0) != XDP_REDIRECT)
		return fallback(cfg, o, DPP_REASON_PORT_UNAVAILABLE);
	o->action = DPP_ACTION_REDIRECT;
	o->egress_ifindex = rule->target;
	return XDP_REDIRECT;
}

#endif /* DPP_NF_REDIRECT_REDIRECT_H */
