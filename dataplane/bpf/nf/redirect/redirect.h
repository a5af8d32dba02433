/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* REDIRECT: send the packet out of the rule's interface (DEVMAP). */
#ifndef DPP_NF_REDIRECT_REDIRECT_H
#define DPP_NF_REDIRECT_REDIRECT_H

#include "core/outcome.h"
#include "nf/redirect/maps.h"

/* The REDIRECT stage: the rule's arg is the egress port (a key of dpp_ports). */
static __always_inline int act_redirect(const struct dpp_act_ctx *a)
{
	__u32 port = a->rule->arg;

	if (bpf_redirect_map(&dpp_ports, port, 0) != XDP_REDIRECT)
		return fallback(a->cfg, a->o, DPP_REASON_PORT_UNAVAILABLE);
	a->o->action = DPP_ACTION_REDIRECT;
	a->o->egress_ifindex = port;
	return XDP_REDIRECT;
}

#endif /* DPP_NF_REDIRECT_REDIRECT_H */
