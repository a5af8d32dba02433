/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Flows within a UE's downlink (MEC 015 MTS sessions with flow filters): a frame of a session
 * marked DPP_ATSSS_FLOW_RULES is looked up in the pipeline's classifier (core/classify.h: its
 * shapes, rules and per-rule counters), its key marked DPP_KEY_ATSSS, and the ATSSS
 * rule it matches gives the mode its flow runs (the rule's arg, an enum dpp_atsss_mode); no rule:
 * the session's own mode.
 *
 * The frame is parsed again here (Ethernet, IP, L4) into a key of its own, in a per-CPU map value
 * with the masked key the search makes: the stage's own parse keeps of its key only what the
 * downlink reads (a session without flow rules never stores its key's other fields; it still
 * executes more than before this lookup existed, the test of its flag and the code around the
 * call: 529 instructions in the stage against 525, bench/insns.py on dpp_atsss_stage,
 * bench/README.md), and the stage's frame and this function's must fit the 512 bytes of stack
 * together (a key and a masked key on this one's stack, or the flow cache's copy of a rule, put
 * them over: 576 bytes, the verifier said), so the flow cache is not probed.
 *
 * What a flow's mode keeps of its own: the scheduler's state is the session's. Round-robin counts
 * its own turns on a session with flow rules (schedule_round_robin), so a round-robin flow takes
 * its paths in turn whatever the UE's flows in other modes send between its frames; the turns are
 * shared by the UE's round-robin frames together (two round-robin flows, or one and the frames
 * left in the session's round-robin), which are split evenly in sum, not each. Weighted's running
 * weights (struct dpp_atsss_session.current) move with WEIGHTED's picks alone: a weighted flow
 * among flows of other modes gets its weights' split exactly, but two weighted flows of a UE (or
 * one and frames in the session's own weighted mode) share them: their sum is split by the
 * weights, each one's not (interleaved 1:1 over weights 1:1, each may keep one path). A state per
 * rule would be a map of its own read and written under a lock for every such frame.
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
#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"

#ifdef DPP_ATSSS_FLOWS
#include "proto/cursor.h"
#include "proto/eth.h"
#include "proto/ipv4.h"
#include "proto/ipv6.h"
#include "proto/l4.h"
#include "core/maps.h"
#include "core/classify.h"
#include "core/counters.h"

/* Value of dpp_atsss_flow_room: a frame's key and the key a shape masks it to (BPF's alone). */
struct atsss_flow_room {
	struct dpp_flow_key key;
	struct dpp_flow_key masked;
};

/* 0 -> this CPU's room for the lookup of a frame's flow (dpp_atsss_flow_rule) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct atsss_flow_room);
} dpp_atsss_flow_room SEC(".maps");

/* The frame's key: its IP header's fields and its ports; nonzero when it cannot be read. */
static __always_inline int atsss_flow_key(struct xdp_md *ctx, struct dpp_flow_key *key)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct cursor c = { .ctx = ctx, .pos = data, .end = end, .stop = end };
	struct dpp_layers l = {};
	__u16 udp_dport;
	__be16 proto;

	__builtin_memset(key, 0, sizeof(*key));
	if (parse_eth(&c, &proto, NULL))
		return -1;
	if (proto == bpf_htons(ETH_P_IP) ? parse_ipv4(&c, key, &l) : parse_ipv6(&c, key, &l))
		return -1;
	return parse_l4(&c, key, &l, &udp_dport);
}

/* The mode of the frame's ATSSS rule, counted on the rule's counter, or `mode` (the session's)
 * when it matches none or cannot be read (a global function: verified once, not in each of the
 * stage's ways to the schedulers). */
__attribute__((noinline)) int dpp_atsss_flow_rule(struct xdp_md *ctx, __u32 mode)
{
	struct atsss_flow_room *room;
	const struct dpp_shape_set *set;
	const struct dpp_config *cfg;
	const struct dpp_rule *rule;
	__u32 zero = 0, active;

	room = bpf_map_lookup_elem(&dpp_atsss_flow_room, &zero);
	cfg = bpf_map_lookup_elem(&dpp_config, &zero);
	if (!room || !cfg || atsss_flow_key(ctx, &room->key))
		return mode;
	active = cfg->shape_set & 1;
	set = bpf_map_lookup_elem(&dpp_shapes, &active);
	if (!set)
		return mode;
	room->key.flags |= DPP_KEY_ATSSS;
	rule = search_shapes_in(&room->key, set, &room->masked);
	if (!rule || rule->action != DPP_ACTION_ATSSS)
		return mode;
	count(&dpp_rule_stats, rule_stat_index(rule->slot), ctx->data_end - ctx->data);
	return rule->arg;
}

/* Whether the session's frames are looked up for their flow's rule (atsss_flow_mode). */
static __always_inline bool atsss_has_flow_rules(const struct dpp_atsss_session *s)
{
	return __builtin_expect(s->flags & DPP_ATSSS_FLOW_RULES, 0);
}

static __always_inline __u8 atsss_flow_mode(struct xdp_md *ctx, __u8 mode)
{
	return dpp_atsss_flow_rule(ctx, mode);
}
#else
/* Never: without a classifier every frame runs in its session's mode, whatever its flags say, and
 * round-robin's turns are its MP_SEQ numbers (schedule_round_robin). */
static __always_inline bool atsss_has_flow_rules(const struct dpp_atsss_session *s __attribute__((unused)))
{
	return false;
}

static __always_inline __u8 atsss_flow_mode(struct xdp_md *ctx __attribute__((unused)), __u8 mode)
{
	return mode;
}
#endif

#endif /* DPP_NF_ATSSS_FLOWS_H */
