/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* FRER in the pipeline: on a node with streams (dpp_frer_gate, and so DPP_FUNCTION_FRER in
 * dpp_config.functions, which the entry tests first), the entry hands every frame to
 * dpp_frer_stage (slot DPP_PROG_FRER of dpp_progs) before parsing it. The stage replicates the
 * frames of the streams generated here and eliminates the duplicates of the streams recovered here
 * (nf/frer/node.h); a frame it leaves alone, and a recovered frame with no port of its own, goes on
 * to the entry again (slot DPP_PROG_ENTRY), marked in dpp_frer_onward so that the entry runs the
 * pipeline on it this time. A node without streams pays one test of the config's word per frame. */
#ifndef DPP_NF_FRER_STAGE_H
#define DPP_NF_FRER_STAGE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "core/maps.h"
#include "core/counters.h"
#include "nf/frer/node.h"

/* Whether the frame is FRER's to see first: the node has streams and the frame did not just come
 * back from the stage (the mark is cleared: the next frame on this CPU is a new one). */
static __always_inline bool frer_first(void)
{
	__u32 zero = 0, *gate = bpf_map_lookup_elem(&dpp_frer_gate, &zero), *onward;

	if (!gate || !*gate)
		return false;
	onward = bpf_map_lookup_elem(&dpp_frer_onward, &zero);
	if (onward && *onward) {
		*onward = 0;
		return false;
	}
	return true;
}

/* The entry's hand-over: returns only when the frame is not FRER's to see, or the slot is empty
 * (then the pipeline runs on it as without FRER). */
static __always_inline void frer_hand_over(struct xdp_md *ctx)
{
	if (frer_first())
		bpf_tail_call(ctx, &dpp_progs, DPP_PROG_FRER);
}

/* Back to the entry, which runs the pipeline on the frame; passed to the kernel should that fail. */
static __always_inline int frer_onward(struct xdp_md *ctx)
{
	__u32 zero = 0, *onward = bpf_map_lookup_elem(&dpp_frer_onward, &zero);

	if (!onward)
		return XDP_PASS;
	*onward = 1;
	bpf_tail_call(ctx, &dpp_progs, DPP_PROG_ENTRY);
	*onward = 0;
	return XDP_PASS;
}

/* A generated stream's frame that cannot be replicated gets the node's default verdict
 * (dpp_config.default_verdict, the pipeline's for what it cannot handle): dropped, or passed to the
 * kernel as it came. */
static __always_inline int frer_ungrouped(void)
{
	__u32 zero = 0;
	const struct dpp_config *cfg = bpf_map_lookup_elem(&dpp_config, &zero);

	return cfg && cfg->default_verdict == XDP_DROP ? XDP_DROP : XDP_PASS;
}

/* The stage's own verdicts are counted as the entry counts its own. */
static __always_inline int frer_counted(int verdict, __u32 reason, __u64 bytes)
{
	count(&dpp_verdicts, verdict, bytes);
	if (reason)
		count(&dpp_reasons, reason, bytes);
	return verdict;
}

SEC("xdp")
int dpp_frer_stage(struct xdp_md *ctx)
{
	__u32 zero = 0, reason = 0, *kinds = bpf_map_lookup_elem(&dpp_frer_gate, &zero);
	__u64 bytes = ctx->data_end - ctx->data;
	struct frer_frame f = {};
	struct frer_match m;
	int verdict;

	count(&dpp_prog_stats, DPP_PROG_FRER, bytes);
	if (!frer_frame(ctx, &f, &m, kinds ? *kinds : 0, &reason))
		return frer_counted(XDP_DROP, reason, bytes);
	verdict = frer_generate(ctx, &f, &m, &reason);
	if (verdict == FRER_UNGROUPED)
		verdict = frer_ungrouped();
	if (verdict == FRER_ONWARD)
		verdict = frer_eliminate(ctx, &f, &m, &reason);
	if (verdict != FRER_ONWARD)
		return frer_counted(verdict, reason, bytes);
	if (reason)
		count(&dpp_reasons, reason, bytes); /* an R-tagged frame of no stream here */
	return frer_onward(ctx);
}

#endif /* DPP_NF_FRER_STAGE_H */
