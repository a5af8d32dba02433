/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ATSSS in the pipeline: on a node with sessions (dpp_atsss_gate, and so DPP_FUNCTION_ATSSS in
 * dpp_config.functions, which the entry tests first), the entry hands a parsed frame that is
 * ATSSS's to dpp_atsss_stage (slot DPP_PROG_ATSSS of dpp_progs), which gives its verdict
 * (nf/atsss/frame.h): the uplink's MP-DCCP decapsulated and its Acks built into the ring, the
 * downlink to a UE with a session encapsulated on the path its scheduler picks. ATSSS's frames are
 * the plain ones (no overlay, no GTP-U) that are DCCP (IP protocol 33: the uplink's, or a UE's) or
 * go to a UE with a session. Behind a tail call, not inline: the DCCP checksum and option walks are
 * verified once in their own program rather than in every path of the entry, and a frame that is
 * not ATSSS's pays, on a node with sessions, the gate's read, a read of the UE filter
 * (dpp_atsss_ues), and a look in the index of sessions (nf/atsss/index.h) only when its
 * destination's bit is set.
 * The stage runs on the receiving CPU only: the dispatcher's workers get GTP-U, never ATSSS's. */
#ifndef DPP_NF_ATSSS_STAGE_H
#define DPP_NF_ATSSS_STAGE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "core/maps.h"
#include "core/counters.h"
#include "core/parse.h"
#define DPP_ATSSS_FLOWS /* the pipeline's stage classifies flows (nf/atsss/flows.h) */
#include "nf/atsss/frame.h"

static __always_inline bool atsss_gate_open(void)
{
	__u32 zero = 0, *gate = bpf_map_lookup_elem(&dpp_atsss_gate, &zero);

	return gate && *gate;
}

/* Whether a UE with a session may have the address: its bit in the UE filter is set. */
static __always_inline bool atsss_maybe_ue(const __be32 *addr)
{
	__u32 bit = atsss_ue_hash(addr) >> (32 - DPP_ATSSS_UE_FILTER_LOG2), word = bit / 64;
	__u64 *bits = bpf_map_lookup_elem(&dpp_atsss_ues, &word);

	return bits && (*bits & (1ULL << (bit & 63)));
}

/* Whether the parsed frame is ATSSS's: plain IP, and DCCP or to a UE with a session. */
static __always_inline bool atsss_mine(const struct dpp_flow_key *k)
{
	if (!k->family || k->overlay != DPP_OVERLAY_NONE || (k->flags & DPP_KEY_GTP))
		return false;
	if (k->proto == DPP_ATSSS_IPPROTO_DCCP)
		return true;
	if (!atsss_maybe_ue(k->dst))
		return false;
	return atsss_find_session(k->family, k->dst, false) != NULL;
}

/* The entry's hand-over: returns only when the frame is not ATSSS's, or the slot is empty (then
 * the pipeline goes on with it as without ATSSS). */
static __always_inline void atsss_hand_over(struct xdp_md *ctx, const struct dpp_flow_key *k)
{
	if (atsss_gate_open() && atsss_mine(k))
		bpf_tail_call(ctx, &dpp_progs, DPP_PROG_ATSSS);
}

SEC("xdp")
int dpp_atsss_stage(struct xdp_md *ctx)
{
	__u64 bytes = ctx->data_end - ctx->data;
	int verdict;

	count(&dpp_prog_stats, DPP_PROG_ATSSS, bytes);
	verdict = atsss_frame(ctx);
	count(&dpp_verdicts, verdict, bytes);
	return verdict;
}

#endif /* DPP_NF_ATSSS_STAGE_H */
