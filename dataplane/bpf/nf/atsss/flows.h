/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Flows within a UE's downlink (MEC 015 MTS sessions with flow filters): a frame of a session
 * marked DPP_ATSSS_FLOW_RULES is looked up in the pipeline's classifier (core/classify.h: its
 * shapes, rules and per-rule counters), its key marked DPP_KEY_ATSSS, and the ATSSS
 * rule it matches gives the mode its flow runs and the slot of its MTS session's scheduler state
 * (the rule's arg: an enum dpp_atsss_mode, and above DPP_ATSSS_RULE_MODE_BITS the slot of
 * dpp_atsss_flow_state); no rule: the session's own mode and state.
 *
 * The frame is parsed again here (Ethernet, IP, L4) into a key of its own, in a per-CPU map value
 * with the masked key the search makes: the stage's own parse keeps of its key only what the
 * downlink reads (a session without flow rules never stores its key's other fields; it still
 * executes more than before this lookup existed, the test of its flag and the code around the
 * call: 527 instructions in the stage against 525, bench/insns.py on dpp_atsss_stage,
 * bench/README.md), and the stage's frame and this function's must fit the 512 bytes of stack
 * together (a key and a masked key on this one's stack, or the flow cache's copy of a rule, put
 * them over: 576 bytes, the verifier said), so the flow cache is not probed.
 *
 * What a flow's mode keeps of its own: an MTS session whose flows run round-robin or weighted has a
 * scheduler state of its own (struct dpp_atsss_flow_state: the running weights, the turns), so that
 * its flows get their split whatever the UE's other frames do: two weighted flows of two MTS
 * sessions interleaved 1:1 each get the weights' split exactly, as do a weighted flow and the
 * session's own weighted frames, and two round-robin flows each alternate the paths. The flows one
 * MTS session selects (its several filters) share its state: the session asked one mode for them
 * together. What they keep of the session's: its paths, its weights (MEC 015 gives an MTS session
 * none: netapp/atsss/mts.py), and its MP_SEQ counter: a UE has one connection-level sequence, which
 * its receiver reorders by, whichever flow a number went to. Frames no rule matches, and rules of
 * the other modes (slot 0), keep the session's state as without flow rules.
 *
 * Where the state lives: in an array of its own, a line a slot, found by the slot the rule's arg
 * carries (one more line a flow's frame touches, its lock on it). Not in the session: its 64 bytes
 * are one line full (lock, weights, paths, numbers), and a UE may have several MTS sessions; state
 * there would grow every session's line, which every frame of a session without flow rules reads.
 * Not in the rule: the classifier's value is 16 bytes at the end of its hash element (core/
 * structs.h), published by the control plane in one write and read by every lookup of its shape;
 * a packet's writes there would race that publication. Not per CPU: a UE's frames come on any CPU,
 * and the split is over all of them. The slot is chosen by the control plane, which writes it into
 * the rules of its MTS session only (netapp/atsss/flows.py): a rule cannot name another MTS
 * session's state, so no tenant's rule moves another's flows' state.
 *
 * What guards it: WEIGHTED's pick reads and writes the state's running weights under the state's
 * bpf_spin_lock (schedule.h, pick_weighted_locked), reading the session's weights and taking the
 * session's MP_SEQ number by atomic add meanwhile, as a session's own pick does under the session's
 * lock; ROUND_ROBIN's turns are one atomic add on the state's counter, then its number one on the
 * session's (schedule_round_robin_flow). A frame takes one lock at most, the state's or the
 * session's, never both, and holds it over no call (the verifier refuses a second bpf_spin_lock
 * while one is held, and any helper call under one): no order of locks, so no deadlock. What the
 * verifier asks of the lock holds: it is the first member of a value of a BTF-described array
 * (struct dpp_atsss_flow_state, dpp_atsss_flow_state), taken and released in one function on the
 * one pointer the lookup gave, with loads, stores and atomic adds between (the session's words
 * and MP_SEQ counter are another map's value: plain memory to the verifier).
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

/* flow state slot -> the scheduler state of one MTS session's flows (its rules' arg names the slot;
 * 0: none); mmapable so that its values start on a page, each state one line of its own */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_FLOW_STATES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_atsss_flow_state);
} dpp_atsss_flow_state SEC(".maps");

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

/* The arg of the frame's ATSSS rule (its mode and its flow state's slot), counted on the rule's
 * counter, or `mode` (the session's; slot 0) when it matches none or cannot be read (a global
 * function: verified once, not in each of the stage's ways to the schedulers). */
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

/* Whether the session's frames are looked up for their flow's rule (atsss_flow_arg). */
static __always_inline bool atsss_has_flow_rules(const struct dpp_atsss_session *s)
{
	return __builtin_expect(s->flags & DPP_ATSSS_FLOW_RULES, 0);
}

/* The rule's arg for the frame's flow: the mode it runs (atsss_arg_mode) and its state's slot. */
static __always_inline __u32 atsss_flow_arg(struct xdp_md *ctx, __u8 mode)
{
	return dpp_atsss_flow_rule(ctx, mode);
}

/* The scheduler state an arg names, or NULL: slot 0 (the session's own state), or none there. */
static __always_inline struct dpp_atsss_flow_state *atsss_flow_state(__u32 arg)
{
	__u32 slot = arg >> DPP_ATSSS_RULE_MODE_BITS;

	return slot ? bpf_map_lookup_elem(&dpp_atsss_flow_state, &slot) : NULL;
}
#else
/* Never: without a classifier every frame runs in its session's mode and state, whatever its flags
 * say, and round-robin's turns are its MP_SEQ numbers (schedule_round_robin). */
static __always_inline bool atsss_has_flow_rules(const struct dpp_atsss_session *s __attribute__((unused)))
{
	return false;
}

static __always_inline __u32 atsss_flow_arg(struct xdp_md *ctx __attribute__((unused)), __u8 mode)
{
	return mode;
}

static __always_inline struct dpp_atsss_flow_state *atsss_flow_state(__u32 arg __attribute__((unused)))
{
	return NULL;
}
#endif

/* The mode an ATSSS rule's arg gives its flow. */
static __always_inline __u8 atsss_arg_mode(__u32 arg)
{
	return arg & ((1u << DPP_ATSSS_RULE_MODE_BITS) - 1);
}

#endif /* DPP_NF_ATSSS_FLOWS_H */
