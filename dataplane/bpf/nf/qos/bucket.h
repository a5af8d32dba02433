/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The buckets of nf/qos/police.h: the token bucket (under the policer's spin lock) and GCRA (the
 * same bucket as one word, by compare-and-swap), their arithmetic argued in police.h's head; and
 * what a CPU keeps in its line when a bucket drops its packet, so that the next packets the bucket
 * is sure to drop are dropped without its lock or shared word (nf/qos/stamp.h, "A bucket seen short
 * in ns") or, on the coarse clock at low rates, without the clock either ("A bucket seen short by
 * jiffies"). */
#ifndef DPP_NF_QOS_BUCKET_H
#define DPP_NF_QOS_BUCKET_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/qos.h"
#include "nf/qos/maps.h"
#include "nf/qos/stamp.h"

/* The token bucket's unit, the nanobit: R bit/s x t ns = R x t nanobits, exactly. */
#define NANOBITS_PER_BYTE 8000000000ULL
/* Below this idle time elapsed x R cannot wrap (2^24 x 4e11 < 2^63): no division. */
#define POLICE_REFILL_EXACT_NS (1ULL << 24)
/* Compare-and-swap tries before a packet is dropped: only CPUs policing the same policer in the
 * same nanoseconds make one fail, and dropping the loser never lets more through. */
#define POLICE_CAS_TRIES 8

/* ---- token bucket: credit in nanobits, up to B x 8e9 (<= 8.6e18), under the value's lock ---- */

/* The credit after `elapsed` ns at rate R, capped at the bucket's size. */
static __always_inline __u64 bucket_refill(__u64 credit, __u64 cap, __u64 elapsed, __u64 rate)
{
	if (elapsed < POLICE_REFILL_EXACT_NS) {
		credit += elapsed * rate; /* < 8.6e18 + 6.7e18: cannot wrap */
		return credit < cap ? credit : cap;
	}
	/* Idle long: elapsed x R may wrap, so ask whether it fills what is missing. (A rate of 0,
	 * which the control plane refuses, would divide to 0 in BPF: a full bucket. No refill.) */
	if (!rate)
		return credit;
	if (credit >= cap || elapsed >= (cap - credit) / rate)
		return cap;
	return credit + elapsed * rate; /* < cap - credit: cannot wrap */
}

/* police_decide()'s verdicts: dropped, passed, passed with a chunk carved for the CPU's credit. */
enum police_verdict {
	POLICE_DROP = 0,
	POLICE_PASS = 1,
	POLICE_CARVED = 2,
};

/* A bucket seen short (struct dpp_policer_stats.short_credit, .stamp): the lock or the shared word
 * is most of a dropped packet's cost (bench/README.md, "A policed rule taken apart"), and a bucket
 * that could not hold a packet stays short for a while: the CPU whose packet the bucket dropped
 * keeps in its own line the time U from which the bucket may hold it, in ns, and the room below it
 * (nf/qos/stamp.h, "A bucket seen short in ns": why a packet bigger than the room on a reading
 * before U is one the bucket drops; the values' bounds). Where the line is asked first
 * (POLICE_WINDOW_CREDIT: police.h's police_line_drops, before a rule's call) such a packet is
 * dropped there; the UPF's token buckets (their line not asked) drop it here, before the lock. The
 * control plane zeroes the line before and after it writes a policer (stamp 0: none;
 * netapp/qos/applier.py says why twice); a packet deciding on the old policer across those writes
 * may leave its U in the new one's line, which then drops on it up to that U (POLICE_UNTIL_AHEAD
 * at most), or, the old one a ticked bucket, its jiffies stamp, up to the old policer's U (at most
 * POLICE_STAMP_AHEAD ticks): it never passes more. */
static __always_inline bool bucket_seen_short(const __u32 *at, __u64 bytes, __u64 now)
{
	const struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);

	return s && police_until_short(s, bytes, now);
}

/* Keeps in this CPU's line `at`, after its bucket dropped a packet of `bytes` on the reading `now`,
 * the time `until` from which the bucket may hold it (0: not known, nothing kept) and the room
 * below the packet (stamp.h, "A bucket seen short in ns"). */
static __always_inline void bucket_saw_short(const __u32 *at, __u64 bytes, __u64 now, __u64 until)
{
	struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);

	if (s)
		police_keep_until(s, bytes - 1, now, until);
}

/* A bucket's jiffies kept pending in line `s` (bucket_line_drops) let go: its decision made, or the
 * packet dropped on the line (a window's credit_window is a window's number, never pending). */
static __always_inline void bucket_unpend(struct dpp_policer_stats *s)
{
	if (s->credit_window & POLICE_STAMP_PENDING)
		s->credit_window = 0;
}

/* The kernel's tick bucket policer p's CPUs stamp their lines in (nf/qos/stamp.h, "A bucket seen
 * short by jiffies"): struct dpp_policer.previous of a token bucket or GCRA on the COARSE clock, as
 * the control plane wrote it (0: none; the sliding window's previous is its count, not a tick). A
 * tick is some ms: a previous of 2^32 or more is a window's packed word (a window's last write
 * racing the slot's rewrite to a bucket), no tick. */
static __always_inline __u64 bucket_tick(const struct dpp_policer *p)
{
	if (p->clock != DPP_POLICE_CLOCK_COARSE || p->previous >> 32)
		return 0;
	return p->algo == DPP_POLICE_ALGO_TOKEN_BUCKET || p->algo == DPP_POLICE_ALGO_GCRA ? p->previous : 0;
}

/* Whether a packet of `bytes` its CPU's credit does not cover is dropped from its line `s` of a
 * ticked bucket alone: its stamp holds at the jiffies and the packet is bigger than the room kept
 * with it (stamp.h, "A bucket seen short by jiffies"). When no stamp holds, the line keeps the
 * jiffies, pending, in its credit_window (a window's word, which the buckets do not use) for the
 * reading the bucket's decision is made on (the chain's reading *now: the jiffies given with it,
 * none in the pipeline); so does a stamp that holds for a packet within its room, so that the
 * bucket's drop of that smaller packet replaces the stamp with its own (a smaller room: more of
 * the packets to come dropped on the line; bucket_stamp keeps a stamp that holds where it makes
 * none). */
static __always_inline bool bucket_line_drops(struct dpp_policer_stats *s, const __u64 *now, __u64 bytes)
{
	__u64 jiffies = POLICE_JIFFIES();

	if (police_stamp_holds(s->stamp, jiffies) && bytes > ~s->short_credit)
		return true;
	s->credit_window = police_stamp_pending(*now ? POLICE_GIVEN_JIFFIES(jiffies) : jiffies);
	return false;
}

/* Keeps in this CPU's line (`at`) of a ticked bucket, after it dropped a packet of `bytes` on the
 * reading `now` made with the line's jiffies pending, the stamp up to which the clock stays before
 * `until` (the time from which the bucket may hold the packet: 0, not known, none) and the room
 * below the packet (stamp.h, "A bucket seen short by jiffies"); where no stamp can be made (the
 * bucket holds the packet within the margin's ticks), `until` itself in ns (police_keep_until),
 * unless the line's stamp still holds at the pending jiffies (it drops more without the clock). A
 * line no longer pending (another program's since) is left as it is; police_count clears the
 * pending word. */
static __always_inline void bucket_stamp(const struct dpp_policer *p, const __u32 *at, __u64 bytes, __u64 now,
					 __u64 until)
{
	struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);
	__u64 stamp;

	if (!s || !(s->credit_window & POLICE_STAMP_PENDING))
		return;
	stamp = police_stamp_until(p, now, until, s->credit_window);
	if (stamp) {
		s->short_credit = ~(bytes - 1);
		s->stamp = stamp;
	} else if (!police_stamp_holds(s->stamp, s->credit_window & ~POLICE_STAMP_PENDING)) {
		police_keep_until(s, bytes - 1, now, until);
	}
}

/* The earliest time a token bucket that held `credit` nanobits at `when` may hold `cost` nanobits
 * (more than credit; `cap` its size): all ones, never, for a cost over its size (stamp.h, "A bucket
 * seen short by jiffies", U). */
static __always_inline __u64 bucket_fills_at(const struct dpp_policer *p, __u64 cap, __u64 credit, __u64 when,
					     __u64 cost)
{
	if (cost > cap || !p->rate)
		return ~0ULL;
	return when + (cost - credit + p->rate - 1) / p->rate;
}

/* Token bucket: the bucket fills at R and holds B; a packet takes its bytes out (and `carve` more
 * for its CPU's credit when the bucket holds both) or is dropped. Credit and last_ns change
 * together under the spin lock: no CPU spends credit another spent. A CPU whose clock read came
 * before the last update's gets no refill (elapsed 0), never a negative one. A drop is kept in this
 * CPU's line (`at`, police_share_index) as the time the bucket may hold the packet (a ticked one's
 * as a jiffies stamp where it can be: bucket_stamp); a packet it shows too big is dropped without
 * the lock: here, or with `lined` (POLICE_WINDOW_CREDIT), on the line asked before
 * (police_line_drops). */
static __always_inline int bucket_pass(struct dpp_policer *p, __u64 bytes, __u64 now, __u32 carve,
				       const __u32 *at, bool lined)
{
	__u64 cap = (__u64)p->burst * NANOBITS_PER_BYTE, cost = bytes * NANOBITS_PER_BYTE, credit;
	__u64 carved = cost + (__u64)carve * NANOBITS_PER_BYTE; /* (2^30 + 2^20) x 8e9 < 2^64 */
	__u64 when, until;
	bool stamped = lined && bucket_tick(p);
	int verdict;

	if (!lined && bucket_seen_short(at, bytes, now))
		return POLICE_DROP;
	bpf_spin_lock(&p->lock);
	credit = bucket_refill(p->credit, cap, now > p->last_ns ? now - p->last_ns : 0, p->rate);
	if (now > p->last_ns)
		p->last_ns = now;
	if (carve && credit >= carved) {
		verdict = POLICE_CARVED;
		credit -= carved;
	} else if (credit >= cost) {
		verdict = POLICE_PASS;
		credit -= cost;
	} else {
		verdict = POLICE_DROP;
	}
	p->credit = credit;
	when = p->last_ns;
	bpf_spin_unlock(&p->lock);
	if (verdict != POLICE_DROP)
		return verdict;
	until = bucket_fills_at(p, cap, credit, when, cost);
	if (stamped)
		bucket_stamp(p, at, bytes, now, until);
	else
		bucket_saw_short(at, bytes, now, until);
	return POLICE_DROP;
}

/* ---- GCRA: the token bucket as one word, the theoretical arrival time (TAT) ---- */

/* GCRA (ITU-T I.371's virtual scheduling) keeps, instead of a bucket's content and its clock, the
 * time at which the bucket will be full again: a packet of b bytes passes if the bucket holds them,
 * that is if the time the bucket still needs (TAT - now) is at most that of the burst's other
 * B - b bytes, and then takes their time (TAT = max(TAT, now) + b x I). With exact arithmetic that
 * is the token bucket; in one 64-bit word it needs no lock: a compare-and-swap, retried. Times are
 * rounded against the packet: I up, its bytes' time up, the rest of the burst's down, so that any
 * stretch of T ns passes at most R x T / 8e9 + B bytes, as the token bucket (at 400 Gb/s a 64-byte
 * packet's 1.28 ns is 82 units of 1/64 ns for 81.92: 0.1% fewer such packets). */
#define GCRA_FRACTION ((1ULL << DPP_POLICE_GCRA_INTERVAL_SHIFT) - 1)

/* bytes x interval / 2^20, rounded down (round 0) or up (GCRA_FRACTION), in two products that
 * cannot wrap (the one product could: up to 2^76). */
static __always_inline __u64 gcra_time(__u64 bytes, __u64 interval, __u64 round)
{
	__u64 whole = bytes * (interval >> DPP_POLICE_GCRA_INTERVAL_SHIFT);

	return whole + ((bytes * (interval & GCRA_FRACTION) + round) >> DPP_POLICE_GCRA_INTERVAL_SHIFT);
}

/* GCRA's room for `bytes` out of the burst: the time the bucket may still need, rounded down
 * (ROOM_NONE when the bytes are more than the burst). */
#define GCRA_ROOM_NONE ((__u64)-1)

static __always_inline __u64 gcra_room(const struct dpp_policer *p, __u64 bytes)
{
	return bytes > p->burst ? GCRA_ROOM_NONE : gcra_time(p->burst - bytes, p->interval, 0);
}

/* The earliest time (ns) at which a GCRA whose arrival time is `tat` (more than `room`) may pass
 * the bytes whose room that is: ceil((tat - room) / 64), without the sum's wrap (stamp.h, "A bucket
 * seen short by jiffies", U). */
static __always_inline __u64 gcra_fills_at(__u64 tat, __u64 room)
{
	__u64 gap = tat - room;

	return (gap >> DPP_POLICE_GCRA_TAT_SHIFT) + !!(gap & ((1ULL << DPP_POLICE_GCRA_TAT_SHIFT) - 1));
}

/* GCRA's drop of a packet of `bytes` at `now`, which it may pass from `until` on (all ones: never;
 * 0: not known, the compare-and-swap lost), kept in its line (`at`) when `lined`, as the token
 * bucket's (bucket_stamp, bucket_saw_short); the UPF's GCRA (not lined) keeps nothing. */
static __always_inline int gcra_dropped(const struct dpp_policer *p, const __u32 *at, __u64 bytes, __u64 now,
					__u64 until, bool lined)
{
	if (lined && bucket_tick(p))
		bucket_stamp(p, at, bytes, now, until);
	else if (lined)
		bucket_saw_short(at, bytes, now, until);
	return POLICE_DROP;
}

/* GCRA: whether the bucket (burst bytes, filling at rate) holds the packet (and `carve` more for
 * its CPU's credit: both taken when it does); its arrival time changed by compare-and-swap, so
 * that no two CPUs spend the same room. A CPU whose clock read came before another's update finds
 * the arrival time later: the bucket emptier, never fuller. A drop is kept in the CPU's line `at`
 * with `lined` (gcra_dropped). */
static __always_inline int gcra_pass(struct dpp_policer *p, __u64 bytes, __u64 now, __u32 carve,
				     const __u32 *line, bool lined)
{
	__u64 at = now << DPP_POLICE_GCRA_TAT_SHIFT, old, start, room, room_carved, cost, next;
	int i, verdict;

	room = gcra_room(p, bytes);
	if (room == GCRA_ROOM_NONE)
		return gcra_dropped(p, line, bytes, now, ~0ULL, lined);
	room_carved = carve ? gcra_room(p, bytes + carve) : GCRA_ROOM_NONE;
	for (i = 0; i < POLICE_CAS_TRIES; i++) {
		old = *(volatile __u64 *)&p->window;
		start = old > at ? old : at;
		if (room_carved != GCRA_ROOM_NONE && start - at <= room_carved) {
			verdict = POLICE_CARVED;
			cost = gcra_time(bytes + carve, p->interval, GCRA_FRACTION);
		} else if (start - at <= room) {
			verdict = POLICE_PASS;
			cost = gcra_time(bytes, p->interval, GCRA_FRACTION);
		} else {
			return gcra_dropped(p, line, bytes, now, gcra_fills_at(old, room), lined);
		}
		next = start + cost;
		if (__sync_val_compare_and_swap(&p->window, old, next) == old)
			return verdict;
	}
	return gcra_dropped(p, line, bytes, now, 0, lined);
}

#endif /* DPP_NF_QOS_BUCKET_H */
