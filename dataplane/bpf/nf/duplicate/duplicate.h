/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* DUPLICATE: send the packet out of every interface of the rule's group, one copy each, as it came.
 * The replication is FRER's (core/replicate.h): broadcast to dpp_dup_tx, the copy kept by each
 * interface's egress program (dup_egress) when the interface is a member of the group. */
#ifndef DPP_NF_DUPLICATE_DUPLICATE_H
#define DPP_NF_DUPLICATE_DUPLICATE_H

#include "core/outcome.h"
#include "core/replicate.h"
#include "nf/duplicate/maps.h"

/* The DUPLICATE stage: the rule's arg is its group (the first half of dpp_dup_members' keys). The
 * ingress interface is not excluded: a group that names it gets its copy back out of it. */
static __always_inline int act_duplicate(const struct dpp_act_ctx *a)
{
	int verdict = replicate(a->ctx, &dpp_dup_tx, a->rule->arg, 0);

	if (verdict != XDP_REDIRECT)
		return fallback(a->cfg, a->o, DPP_REASON_PORT_UNAVAILABLE);
	a->o->action = DPP_ACTION_DUPLICATE;
	return XDP_REDIRECT;
}

/* A copy on its way out of ctx->egress_ifindex: kept when that interface is one of its group's. */
static __always_inline int dup_egress(struct xdp_md *ctx)
{
	struct dpp_dup_member_key key;

	if (!replica_id(ctx, &key.group))
		return XDP_DROP; /* not a duplicated frame */
	key.ifindex = ctx->egress_ifindex;
	return bpf_map_lookup_elem(&dpp_dup_members, &key) ? XDP_PASS : XDP_DROP;
}

#endif /* DPP_NF_DUPLICATE_DUPLICATE_H */
