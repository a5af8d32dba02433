/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Sequence recovery (IEEE 802.1CB 7.4.3): whether a frame of a stream, with or without a sequence
 * number, is passed or discarded, by the vector or the match algorithm, with the standard's
 * counters; the recovery reset after frerSeqRcvyResetMSec without a passed frame, and latent error
 * detection (7.4.4), both acted on when the stream's next frame arrives, from the times kept in the
 * state (no timer in user space: a stream nobody sends on needs no reset until someone does). The
 * reference model, written from the same clauses, is netapp/frer/model.py.
 *
 * Concurrency: the frames of one stream arrive on several CPUs (one path's NIC queue each, and RSS
 * within a path). What decides a tagged frame is the state word (union frer_state: history, seq,
 * span, take_any, 8 aligned bytes of the slot) and the parameters, which the data path never
 * changes. So a frame is decided in two ways:
 *  - without the lock (frer_fast), when no reset is due, latent error detection is off and the word
 *    says neither TakeAny nor held: the word read at once, the decision and the next word
 *    computed from it alone, and the next word put in place by one compare-and-swap against the
 *    word read. The swap succeeds only if the word is still the one read, so the frame gets the
 *    decision a frame alone at the moment of the swap would get (that the word may have changed
 *    and come back in between changes nothing: the decision is a function of the word). A
 *    duplicate changes no state: its moment is the read, and it writes no word. A swap that fails
 *    is tried once more, then the frame goes the lock's way;
 *  - under the slot's bpf_spin_lock (frer_locked), for the rare paths: the reset when due, latent
 *    error detection, the first frame after a reset, a frame outside the history (rogue), one
 *    without an R-tag, a swap lost twice. The holder first sets the word's held bit by an atomic
 *    OR (FRER_HELD, which returns the word it found): from then on no swap against an earlier read
 *    can succeed, and a CPU that reads the held word takes the lock's way too, so the holder
 *    owns the word until it stores the next one (held bit clear) before unlocking. Its moment is
 *    that OR.
 * A frame passed or discarded without the lock is counted in this CPU's dpp_frer_cpu_counts (two
 * CPUs on a stream then write no line but the word's), one under the lock in the slot: the
 * counters are their sums. The rarer counters that frames decided either way move (out_of_order,
 * lost) are atomic adds; those only the lock's way moves (rogue, tagless, resets, latent error
 * detection's) are plain under it. With latent error detection on, every frame goes the lock's
 * way: its difference compares passed with discarded, both then whole in the slot.
 * restart_ns (RemainingTicks restarted) is stored plainly by each passed frame: of two CPUs passing
 * frames at once the earlier clock may be stored last, which brings the reset closer by the time
 * between the two clock reads (well under a microsecond, the timeout some milliseconds at least).
 * No helper is called while the lock is held (the clock is read before).
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
#define FRER_HELD 0x80 /* take_any's bit while the lock holder owns the word */
#define FRER_SLOW (-1) /* frer_fast(): the frame is the lock's to decide */
#define FRER_TRIES 2   /* swaps tried before a frame goes the lock's way */

/* The state word of a slot, as it lies there (history first, at offset 8). */
union frer_state {
	__u64 word;
	struct {
		__u32 history;
		__u16 seq;
		__u8 span;
		__u8 take_any;
	};
};

_Static_assert(__builtin_offsetof(struct dpp_frer_recovery, history) % 8 == 0,
	       "the state word is aligned");
_Static_assert(__builtin_offsetof(struct dpp_frer_recovery, take_any) ==
		       __builtin_offsetof(struct dpp_frer_recovery, history) + 7,
	       "history, seq, span and take_any are one word");

static __always_inline __u64 *frer_word(struct dpp_frer_recovery *r)
{
	return (__u64 *)&r->history;
}

static __always_inline bool frer_passes(int decision)
{
	return decision == DPP_FRER_NO_STREAM || decision == DPP_FRER_TAKE_ANY ||
	       decision == DPP_FRER_IN_ORDER || decision == DPP_FRER_OUT_OF_ORDER ||
	       decision == DPP_FRER_TAGLESS_PASSED;
}

/* SequenceRecoveryReset (7.4.3.3): the next tagged frame is taken, whatever its number. */
static __always_inline void frer_reset(struct dpp_frer_recovery *r, union frer_state *s)
{
	s->seq = DPP_FRER_SEQ_SPACE - 1;
	s->history = 0;
	s->span = 0;
	s->take_any = 1;
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

/* RemainingTicks ran out since the last passed frame (a CPU whose clock read came before that
 * frame's sees no time elapsed, never a negative one). */
static __always_inline bool frer_reset_due(const struct dpp_frer_recovery *r, __u64 now)
{
	__u64 restart = *(volatile const __u64 *)&r->restart_ns;

	return r->reset_ns && now > restart && now - restart >= r->reset_ns;
}

static __always_inline void frer_restart(struct dpp_frer_recovery *r, __u64 now)
{
	*(volatile __u64 *)&r->restart_ns = now;
}

static __always_inline int frer_take_any(union frer_state *s, __u16 seq)
{
	s->take_any = 0;
	s->seq = seq;
	s->history = 1;
	s->span = 1;
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

/* VectorRecoveryAlgorithm (7.4.3.4) on state *s, changed in place; *lost the numbers that left
 * the history unseen. delta is seq - RecovSeqNum in -2^15..2^15-1. Counts nothing. */
static __always_inline int frer_vector(const struct dpp_frer_recovery *r, union frer_state *s, __u16 seq,
				       __u32 *lost)
{
	__s32 delta = (__s16)(__u16)(seq - s->seq), len = r->history_len;
	__u32 bit, mask = frer_history_mask(r->history_len);

	if (delta >= len || delta <= -len)
		return DPP_FRER_ROGUE;
	if (delta <= 0) {
		bit = 1U << -delta;
		if (s->history & bit)
			return DPP_FRER_DUPLICATE;
		s->history |= bit;
		return DPP_FRER_OUT_OF_ORDER;
	}
	/* delta in 1..len-1: bits len-delta..len-1 leave; those unseen and tracked are lost (a frame
	 * in order leaves nothing unseen, and adds to no counter for it) */
	*lost = __builtin_popcount(mask & ~(mask >> delta) & ~s->history & frer_tracked_mask(s->span));
	s->history = ((s->history << delta) | 1) & mask;
	s->span = s->span + delta > FRER_SPAN_MAX ? FRER_SPAN_MAX : s->span + delta;
	s->seq = seq;
	return delta != 1 ? DPP_FRER_OUT_OF_ORDER : DPP_FRER_IN_ORDER;
}

/* MatchRecoveryAlgorithm (7.4.3.5) on state *s. Counts nothing. */
static __always_inline int frer_match(union frer_state *s, __u16 seq)
{
	__u16 delta = seq - s->seq;

	if (!delta)
		return DPP_FRER_DUPLICATE;
	s->seq = seq;
	return delta != 1 ? DPP_FRER_OUT_OF_ORDER : DPP_FRER_IN_ORDER;
}

static __always_inline int frer_algorithm(const struct dpp_frer_recovery *r, union frer_state *s, __u16 seq,
					  __u32 *lost)
{
	return r->algo == DPP_FRER_ALGO_MATCH ? frer_match(s, seq) : frer_vector(r, s, seq, lost);
}

/* The counters of a passed frame that frames decided with and without the lock both move. */
static __always_inline void frer_count_order(struct dpp_frer_recovery *r, int decision, __u32 lost)
{
	if (decision == DPP_FRER_OUT_OF_ORDER)
		__sync_fetch_and_add(&r->out_of_order, 1);
	if (lost)
		__sync_fetch_and_add(&r->lost, lost);
}

/* A tagged frame decided without the lock (the header's comment says when, and why that is
 * linearizable with the lock's way), FRER_SLOW when it is the lock's to decide; counted in
 * `counts`, this CPU's for the stream. */
static __always_inline int frer_fast(struct dpp_frer_recovery *r, struct dpp_frer_cpu_counts *counts,
				     __u16 seq, __u64 now)
{
	union frer_state s, next;
	__u32 lost;
	int decision, i;

	if ((r->flags & DPP_FRER_LATENT) || frer_reset_due(r, now))
		return FRER_SLOW;
	for (i = 0; i < FRER_TRIES; i++) {
		s.word = *(volatile __u64 *)frer_word(r);
		if (s.take_any)
			return FRER_SLOW;
		next = s;
		lost = 0;
		decision = frer_algorithm(r, &next, seq, &lost);
		if (decision == DPP_FRER_ROGUE)
			return FRER_SLOW;
		if (decision == DPP_FRER_DUPLICATE) {
			counts->discarded++;
			if (r->flags & DPP_FRER_INDIVIDUAL)
				frer_restart(r, now);
			return decision;
		}
		if (__sync_val_compare_and_swap(frer_word(r), s.word, next.word) == s.word) {
			counts->passed++;
			frer_count_order(r, decision, lost);
			frer_restart(r, now);
			return decision;
		}
	}
	return FRER_SLOW;
}

/* The lock's way: the timers, then the decision on the state word the holder owns meanwhile. */
static __always_inline int frer_locked(struct dpp_frer_recovery *r, bool tagged, __u16 seq, __u64 now)
{
	union frer_state s;
	__u32 lost = 0;
	int decision;

	bpf_spin_lock(&r->lock);
	s.word = __sync_fetch_and_or(frer_word(r), (__u64)FRER_HELD << 56);
	if (!s.take_any && frer_reset_due(r, now))
		frer_reset(r, &s);
	if (r->flags & DPP_FRER_LATENT)
		frer_latent(r, now);
	if (!tagged) {
		r->tagless++;
		decision = r->flags & DPP_FRER_TAKE_NO_SEQUENCE ? DPP_FRER_TAGLESS_PASSED
								 : DPP_FRER_TAGLESS_DISCARDED;
	} else if (s.take_any) {
		decision = frer_take_any(&s, seq);
	} else {
		decision = frer_algorithm(r, &s, seq, &lost);
		if (decision == DPP_FRER_ROGUE)
			r->rogue++;
	}
	if (frer_passes(decision)) {
		r->passed++;
		frer_count_order(r, decision, lost);
		frer_restart(r, now);
	} else {
		if (decision != DPP_FRER_TAGLESS_DISCARDED)
			r->discarded++;
		if (r->flags & DPP_FRER_INDIVIDUAL)
			frer_restart(r, now);
	}
	*(volatile __u64 *)frer_word(r) = s.word;
	bpf_spin_unlock(&r->lock);
	return decision;
}

/* The recovery function of `stream` (its slot of dpp_frer_recovery), NULL for none. */
static __always_inline struct dpp_frer_recovery *frer_recovery(__u32 stream)
{
	struct dpp_frer_recovery *r = stream ? bpf_map_lookup_elem(&dpp_frer_recovery, &stream) : NULL;

	return r && r->history_len ? r : NULL;
}

/* Recovery function `r` (frer_recovery(), of stream handle `stream`) decides for a frame (tagged:
 * with sequence number seq) that arrived at `now`: an enum dpp_frer_decision (frer_passes() tells
 * whether it goes on). */
static __always_inline int frer_recover(struct dpp_frer_recovery *r, __u32 stream, bool tagged, __u16 seq,
					__u64 now)
{
	struct dpp_frer_cpu_counts *counts;
	int decision = FRER_SLOW;

	if (!r)
		return DPP_FRER_NO_STREAM;
	counts = tagged ? bpf_map_lookup_elem(&dpp_frer_cpu_counts, &stream) : NULL;
	if (counts)
		decision = frer_fast(r, counts, seq, now);
	return decision != FRER_SLOW ? decision : frer_locked(r, tagged, seq, now);
}

#endif /* DPP_NF_FRER_RECOVER_H */
