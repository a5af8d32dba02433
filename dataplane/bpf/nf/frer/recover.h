/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Sequence recovery (IEEE 802.1CB 7.4.3): whether a frame of a stream, with or without a sequence
 * number, is passed or discarded, by the vector or the match algorithm, with the standard's
 * counters; the recovery reset after frerSeqRcvyResetMSec without a passed frame, and latent error
 * detection (7.4.4), both acted on when the stream's next frame arrives, from the times kept in the
 * state (no timer in user space: a stream nobody sends on needs no reset until someone does). The
 * reference model, written from the same clauses, is netapp/frer/model.py.
 *
 * Concurrency: the frames of one stream arrive on several CPUs (one path's NIC queue each, and RSS
 * within a path), so the state, its times and its counters change together under the slot's
 * bpf_spin_lock; no helper is called while it is held (the clock is read before).
 *
 * Where this reads the standard more strictly than a literal timer would:
 *  - lost counts a sequence number that leaves the history unseen (7.4.3.4), but only one at or
 *    after the first frame passed since the last reset: the history a reset leaves is empty, and the
 *    numbers before that first frame were never expected (counting them would add up to
 *    history_len - 1 lost frames at every reset of a stream that lost none);
 *  - discarded counts every tagged frame not passed (duplicates and rogue frames alike); tagless
 *    counts frames without an R-tag, passed or not;
 *  - a reset, and a latent error test or reset period, that fall in a silent stretch happen once,
 *    when the next frame arrives. */
#ifndef DPP_NF_FRER_RECOVER_H
#define DPP_NF_FRER_RECOVER_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/frer.h"
#include "nf/frer/maps.h"

#define FRER_SPAN_MAX 255

static __always_inline bool frer_passes(int decision)
{
	return decision == DPP_FRER_NO_STREAM || decision == DPP_FRER_TAKE_ANY ||
	       decision == DPP_FRER_IN_ORDER || decision == DPP_FRER_OUT_OF_ORDER ||
	       decision == DPP_FRER_TAGLESS_PASSED;
}

/* SequenceRecoveryReset (7.4.3.3): the next tagged frame is taken, whatever its number. */
static __always_inline void frer_reset(struct dpp_frer_recovery *r)
{
	r->seq = DPP_FRER_SEQ_SPACE - 1;
	r->history = 0;
	r->span = 0;
	r->take_any = 1;
	r->resets++;
}

/* CurBaseDifference's expression (7.4.4): with every path delivering, each passed frame has
 * latent_paths - 1 discarded copies, and the difference does not move. */
static __always_inline __s64 frer_difference(const struct dpp_frer_recovery *r)
{
	return (__s64)(r->passed * (r->latent_paths - 1)) - (__s64)r->discarded;
}

/* LatentErrorReset and LatentErrorTest (7.4.4.2-3), when due at `now`. */
static __always_inline void frer_latent(struct dpp_frer_recovery *r, __u64 now)
{
	__s64 diff;

	if (now >= r->latent_reset_ns) {
		r->base_difference = frer_difference(r);
		r->latent_resets++;
		r->latent_reset_ns = now + r->latent_reset_period_ns;
		if (!r->latent_test_ns)
			r->latent_test_ns = now + r->latent_period_ns;
	}
	if (now >= r->latent_test_ns) {
		diff = r->base_difference - frer_difference(r);
		if (diff < 0)
			diff = -diff;
		if (diff > (__s64)r->latent_difference)
			r->latent_errors++;
		r->latent_test_ns = now + r->latent_period_ns;
	}
}

/* The timers, lazily: RemainingTicks ran out since the last passed frame (a CPU whose clock read
 * came before that frame's sees no time elapsed, never a negative one). */
static __always_inline void frer_timers(struct dpp_frer_recovery *r, __u64 now)
{
	if (!r->take_any && r->reset_ns && now > r->restart_ns && now - r->restart_ns >= r->reset_ns)
		frer_reset(r);
	if (r->flags & DPP_FRER_LATENT)
		frer_latent(r, now);
}

static __always_inline int frer_take_any(struct dpp_frer_recovery *r, __u16 seq)
{
	r->take_any = 0;
	r->seq = seq;
	r->history = 1;
	r->span = 1;
	return DPP_FRER_TAKE_ANY;
}

/* The history's bits that hold its history_len sequence numbers. */
static __always_inline __u32 frer_history_mask(__u8 len)
{
	return len >= 32 ? ~0U : (1U << len) - 1;
}

/* Bits of the history that stand for numbers at or after the first passed since the reset (bit
 * i: seq - i). */
static __always_inline __u32 frer_tracked_mask(__u8 span)
{
	return span >= 32 ? ~0U : (1U << span) - 1;
}

/* VectorRecoveryAlgorithm (7.4.3.4). delta is seq - RecovSeqNum in -2^15..2^15-1. */
static __always_inline int frer_vector(struct dpp_frer_recovery *r, __u16 seq)
{
	__s32 delta = (__s16)(__u16)(seq - r->seq), len = r->history_len;
	__u32 bit, mask = frer_history_mask(r->history_len), leaving;

	if (delta >= len || delta <= -len) {
		r->rogue++;
		return DPP_FRER_ROGUE;
	}
	if (delta <= 0) {
		bit = 1U << -delta;
		if (r->history & bit)
			return DPP_FRER_DUPLICATE;
		r->history |= bit;
		r->out_of_order++;
		return DPP_FRER_OUT_OF_ORDER;
	}
	/* delta in 1..len-1: bits len-delta..len-1 leave; those unseen and tracked are lost (counted
	 * only then: a frame in order leaves nothing unseen, and its line is not written for nothing) */
	leaving = mask & ~(mask >> delta) & ~r->history & frer_tracked_mask(r->span);
	if (leaving)
		r->lost += __builtin_popcount(leaving);
	r->history = ((r->history << delta) | 1) & mask;
	r->span = r->span + delta > FRER_SPAN_MAX ? FRER_SPAN_MAX : r->span + delta;
	r->seq = seq;
	if (delta != 1) {
		r->out_of_order++;
		return DPP_FRER_OUT_OF_ORDER;
	}
	return DPP_FRER_IN_ORDER;
}

/* MatchRecoveryAlgorithm (7.4.3.5). */
static __always_inline int frer_match(struct dpp_frer_recovery *r, __u16 seq)
{
	__u16 delta = seq - r->seq;

	if (!delta)
		return DPP_FRER_DUPLICATE;
	r->seq = seq;
	if (delta != 1) {
		r->out_of_order++;
		return DPP_FRER_OUT_OF_ORDER;
	}
	return DPP_FRER_IN_ORDER;
}

static __always_inline int frer_decide(struct dpp_frer_recovery *r, bool tagged, __u16 seq)
{
	if (!tagged) {
		r->tagless++;
		return r->flags & DPP_FRER_TAKE_NO_SEQUENCE ? DPP_FRER_TAGLESS_PASSED : DPP_FRER_TAGLESS_DISCARDED;
	}
	if (r->take_any)
		return frer_take_any(r, seq);
	return r->algo == DPP_FRER_ALGO_MATCH ? frer_match(r, seq) : frer_vector(r, seq);
}

/* The recovery function of `stream` (its slot of dpp_frer_recovery), NULL for none. */
static __always_inline struct dpp_frer_recovery *frer_recovery(__u32 stream)
{
	struct dpp_frer_recovery *r = stream ? bpf_map_lookup_elem(&dpp_frer_recovery, &stream) : NULL;

	return r && r->history_len ? r : NULL;
}

/* Recovery function `r` (frer_recovery()) decides for a frame (tagged: with sequence number seq)
 * that arrived at `now`: an enum dpp_frer_decision (frer_passes() tells whether it goes on). */
static __always_inline int frer_recover(struct dpp_frer_recovery *r, bool tagged, __u16 seq, __u64 now)
{
	int decision;

	if (!r)
		return DPP_FRER_NO_STREAM;
	bpf_spin_lock(&r->lock);
	frer_timers(r, now);
	decision = frer_decide(r, tagged, seq);
	if (frer_passes(decision)) {
		r->passed++;
		r->restart_ns = now;
	} else {
		if (decision != DPP_FRER_TAGLESS_DISCARDED)
			r->discarded++;
		if (r->flags & DPP_FRER_INDIVIDUAL)
			r->restart_ns = now;
	}
	bpf_spin_unlock(&r->lock);
	return decision;
}

#endif /* DPP_NF_FRER_RECOVER_H */
