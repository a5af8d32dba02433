/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* DUPLICATE: send the packet out of every interface of the rule's group, one copy each, as it came.
 * The replication is FRER's (core/replicate.h): a broadcast to the rule's group in dpp_dup_tx,
 * whose entries are the group's interfaces only, so no copy needs an egress program to drop it. */
#ifndef DPP_NF_DUPLICATE_DUPLICATE_H
#define DPP_NF_DUPLICATE_DUPLICATE_H

#include "core/outcome.h"
#include "core/replicate.h"
#include "nf/duplicate/maps.h"

/* The DUPLICATE stage: the rule's arg is its group (a key of dpp_dup_tx). The ingress interface is
 * not excluded: a group that names it gets its copy back out of it. */
static __always_inline int act_duplicate(const struct dpp_act_ctx *a)
{
	int verdict = broadcast_group(&dpp_dup_tx, a->rule->arg, 0);

	if (verdict != XDP_REDIRECT)
		return fallback(a->cfg, a->o, DPP_REASON_PORT_UNAVAILABLE);
	a->o->action = DPP_ACTION_DUPLICATE;
	return XDP_REDIRECT;
}

#endif /* DPP_NF_DUPLICATE_DUPLICATE_H */
