/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* What every action shares: what its stage is handed, the outcome it reports (counted, traced), the
 * configured fallback verdict, and bounded offsets of the headers it rewrites. */
#ifndef DPP_CORE_OUTCOME_H
#define DPP_CORE_OUTCOME_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "dpp/reasons.h"
#include "proto/cursor.h"

/* Outer headers a rewrite can reach: offsets are masked to this power of two so the verifier sees
 * them bounded. Outer headers never lie deeper (proto/ipv6.h stops IPv6 extension chains long
 * before). */
#define DPP_MAX_HDR_OFFSET 1024

static __always_inline __u32 bounded_offset(__u32 off)
{
	barrier_var(off); /* keep clang from dropping the mask it can prove redundant */
	return off & (DPP_MAX_HDR_OFFSET - 1);
}

/* What happened to a packet: counted, and traced when tracing is on. */
struct dpp_outcome {
	__u32 action; /* enum dpp_action carried out */
	__u32 reason; /* enum dpp_reason, DPP_REASON_NONE when the rule was simply obeyed */
	__u32 cpu;
	__u32 alt_group;
	__u32 alt_member;
	__u32 egress_ifindex;
	__u32 route_path; /* enum dpp_route_path: where a forwarded packet's next hop came from */
};

/* What an action's stage (act_<name>, core/act.h) is handed: every stage has this one signature. */
struct dpp_act_ctx {
	struct xdp_md *ctx;
	const struct dpp_flow_key *key;
	const struct dpp_layers *l;
	const struct dpp_rule *rule; /* the matched rule; NULL: unmatched traffic, served best effort */
	const struct dpp_config *cfg;
	__u64 bytes; /* the packet's length, measured once */
	struct dpp_outcome *o;
};

/* The outcome before anything happened to the packet: no action, reason or route path, and no CPU,
 * group or member (DPP_NONE). Zeroed, then the three set: clang 14 builds an initializer's DPP_NONE
 * words through registers, 15 instructions where these stores take 9. */
static __always_inline void outcome_init(struct dpp_outcome *o)
{
	__builtin_memset(o, 0, sizeof(*o));
	o->cpu = DPP_NONE;
	o->alt_group = DPP_NONE;
	o->alt_member = DPP_NONE;
}

/* The configured verdict for packets we could not (or would not) handle. Only PASS or DROP. */
static __always_inline int fallback(const struct dpp_config *cfg, struct dpp_outcome *o, __u32 reason)
{
	o->action = DPP_ACTION_DEFAULT;
	o->reason = reason;
	return cfg->default_verdict == XDP_DROP ? XDP_DROP : XDP_PASS;
}

#endif /* DPP_CORE_OUTCOME_H */
