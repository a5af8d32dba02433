/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The policers: whether a packet of some bytes, at some time, conforms to its policer's rate and
 * burst (police()), by one of four algorithms; its counters. The reference model, written from the
 * same definitions, is netapp/qos/model.py.
 *
 * Arithmetic (unsigned 64 bits), for every configuration within dpp/nf/qos.h's limits: rate R from
 * 8e3 to 4e11 bit/s (< 2^39), burst B up to 2^30 bytes, windows W = 2^s ns with s from 10 to 32 and
 * R x W / 8e9 up to 2^30 bytes. Nothing is divided on the way of a packet (but the token
 * bucket's after 16 ms idle), so nothing is rounded but where said (the sliding window's weight,
 * up, by under a byte: never in the packet's favour). Largest intermediate values:
 *   token bucket   credit + elapsed x R < 8.6e18 + 2^24 x 4e11 = 1.54e19 < 2^64 (1.84e19)
 *   fixed window   (count + bytes) x 1e9 <= 2^30 x 1e9 = 1.1e18 (window_fits tests the sum
 *                  against 2^30 first); with a carve (< 2^20) after the bytes fit, the sum
 *                  < 2^30 + 2^20 before that test; R << (s - 3) <= 2^30 x 1e9
 *   sliding window prev x (W - t) + W - 1 < 2^30 x 2^32 + 2^32 < 2^63; weighted + count + bytes
 *                  < 3 x 2^30 before window_fits' test, then as the fixed window
 *   GCRA           interval I = ceil(8e9 x 2^26 / R) <= 1e6 x 2^26 < 2^46; a time of b <= 2^30
 *                  bytes, b x I / 2^20 (up to 2^56), summed from b x (I >> 20) < 2^56 and
 *                  b x (I & (2^20 - 1)) < 2^50; the arrival time, at most now x 64 + the
 *                  burst's time + a unit (2^56 + 1), < 2^64 for a clock below 2^57 ns (4.5
 *                  years since boot)
 * eUPF's sliding window, by contrast, keeps the rate in 32 bits (wraps above 4.29 Gb/s), divides
 * 1e9 by the rate in integers (one packet's time is 0 ns above 1 Gb/s: no limit) and updates its
 * state with plain stores (two CPUs both spend the same room).
 *
 * The clock (struct dpp_policer.clock). PRECISE reads bpf_ktime_get_ns() (some 30 ns on a VM's
 * kvm-clock); COARSE reads bpf_ktime_get_coarse_ns(), the same CLOCK_MONOTONIC as it was at its
 * last tick (no clock source is read, but a helper call: 14-16 ns here, some 25 on another day:
 * bench/README.md), or the word a timer keeps that clock in, with a load (nf/qos/clock.h: a clock
 * with the same bounds), so that it lags the precise clock by less than a tick, 1/CONFIG_HZ (4 ms
 * at HZ=250, 1 ms at 1000, 10 ms at 100; clock_getres() of CLOCK_MONOTONIC_COARSE says it), and
 * moves in steps of a tick. A late tick (a timer interrupt held off) makes one step two: the bounds
 * below allow a lag of up to two ticks, L = 2 x tick. Never ahead of the real time and at most L
 * behind it, the clock advances between T - L and T + L over any stretch of T ns. What that does
 * to each algorithm (R bit/s, B bytes, D = R x tick / 8e9 the bytes a tick refills, A = R x W /
 * 8e9 a window's allowance):
 *   token bucket, GCRA  time arrives a tick at a time, and with it D bytes of room at once. Any
 *                  stretch of T passes at most R (T + L) / 8e9 + B = R T / 8e9 + B + 2 D; over time
 *                  the rate is exact (the clock does not drift), provided a step's refill fits in
 *                  the bucket: with traffic over the rate the bucket holds under a packet when a
 *                  step comes, so nothing is lost while B >= 2 D + F (two ticks' refill, and a
 *                  frame's leftover, F the largest frame, as counted: its headers with it). The
 *                  control plane counts F as an MTU of 1,500 bytes (clock_for): frames bigger (an
 *                  Ethernet header and tags, a tunnel's, a jumbo frame) may lose up to their excess
 *                  over it of a step's refill, never pass more. Then the bound is at most R T /
 *                  8e9 + 2 B. Below that the rate falls to at most B per step (at B = D / 2, half
 *                  of it): precise.
 *   fixed window   a window starts when the clock crosses k W, up to L late: windows last W +- L
 *                  and average W, so the rate over time is the same; a stretch of T spans at most
 *                  floor((T + L) / W) + 2 windows, A each (precise: floor(T / W) + 2); in a W-long
 *                  stretch 3 A where the precise clock allows 2 A, so long as W > L (rare: only
 *                  stretches within L of a multiple of W). Coarse when W >= 32 ticks, so that a
 *                  window is within 1/16 of its length (L / W) and stretches meet a third window
 *                  1 time in 16 at most.
 *   sliding window the same windows, and the weight of the window before read up to L late: its
 *                  estimate is never below the precise one (fewer of the window's ns are taken as
 *                  gone), and the room that grows within a step arrives at its end, as if the
 *                  arrivals were L apart: at most L / W of the rate is lost (accuracy.py's G / W),
 *                  1/16 at 32 ticks; its bound is the fixed window's.
 * The control plane (netapp/qos/applier.py, clock_for) writes COARSE where those hold and PRECISE
 * elsewhere. A chain (struct dpp_policer.parent) reads the clock once, the one its first policer
 * asks for, and the parent decides on that reading: the control plane writes a child coarse only
 * when its parent is too (a precise parent fed coarse readings would be a coarse one, without the
 * bound's check), and a parent rewritten precise has its coarse children's clock rewritten precise
 * first, in the same call (their state kept), so that what differs is a precise child's reading
 * serving a coarse parent, which is better than it asked for. (Reading the precise clock again for a
 * precise parent after a coarse child took 8 bytes more of stack than dpp_upf_police had before the
 * entry's frame was cut.) A parent shared by children of both clocks decides on readings of either:
 * a reading behind the policer's last one refills nothing (token bucket), finds less room (GCRA) or
 * counts in the newer window: it never lets more through
 * (but a precise reading may refill a token bucket ahead of the coarse clock its CPUs' jiffies
 * stamps stand for: such a bucket has no tick, nf/qos/stamp.h, "A bucket seen short by jiffies").
 * A rule's own policer and its slice's (nf/qos/rule.h) share a reading the same way, the own
 * one's, and are chosen the same way: the own one coarse only when its slice policer is too (or
 * there is none), made precise with it when the slice policer is rewritten precise.
 *
 * The CPUs' credit (struct dpp_policer_stats.credit and .chunk; the windows' after the buckets'). A locked
 * instruction costs some 18 ns on this VM, most of a hot policer's cost: a CPU whose packet finds
 * the bucket holding the packet and what its credit lacks of a chunk C (C - credit) takes both in
 * the one lock or compare-and-swap, and its credit is then C; its next packets pass on the credit
 * alone, with plain stores to its own line of its row of dpp_policer_stats (no shared line written,
 * no atomic), until the credit is below a packet. A packet that does not find both in the bucket is decided on the
 * bucket alone, as without a credit (its CPU's credit, under that packet, is kept). Bytes are never
 * created: what passes is what left the bucket, now or earlier, and a CPU holds at most C. So with
 * N CPUs any stretch of T ns passes at most what the bucket lets out in it, R T / 8e9 + B_bucket,
 * and what the CPUs held when it began, N C: the control plane writes B_bucket = B - N C
 * (netapp/qos/applier.py, chunk_for), so that the bound is the one asked, R T / 8e9 + B, and C only
 * where it is small beside B (B / (8 N) at most): the bucket alone, which a CPU meets when its
 * credit is out, is 7/8 of B at least. Over time the rate is the bucket's: a CPU's credit is spent
 * when it sees the policer's traffic again; a CPU that never does keeps at most C unspent (the
 * chunk is written afresh with the policer, so no other policer spends it). The credit is checked
 * with the gate: a closed gate drops whatever a CPU holds. The reference model
 * (netapp/qos/model.py) keeps the CPUs' credits as this does.
 *   The windows (FIXED_WINDOW, SLIDING_WINDOW) carve a CPU's credit out of the current window's
 * allowance A: a packet the credit does not cover asks for what it lacks of C with its own bytes,
 * and when the window has room for both (the sliding window: its estimate with both within A) both
 * are counted in the window in the one compare-and-swap. The credit is that window's: the CPU's line
 * is stamped with the window's number (struct dpp_policer_stats.credit_window, the clock >> s, all
 * 64 bits: it never wraps), a packet of another window empties a credit stamped otherwise before
 * anything else (police_credit_window: it was counted in its own window, and may pass nothing in
 * this one) and stamps its own, and a carve is made only by a packet of the window it counts in (a
 * late one, counted in the newer window, carves none). So whatever passes in a window, on the
 * shared word or on credits, was counted in it: a window still lets at most A through, the sliding
 * window's estimate still counts every byte a credit may pass (at its carve's time, when the window
 * before weighed more), and the bounds below (the fixed window's 2 A in any W-long stretch) are
 * unchanged. What credits do is lose rate: bytes carved and not spent when the window ends are
 * counted and never pass, at most N C a window, so a window passes at least A - N C - a packet of
 * traffic that keeps coming over the rate (a CPU that keeps receiving spends its credit; only one
 * whose traffic stops holds it unspent). The control plane (chunk_for) writes C = A / (16 N) at
 * most, so that at most 1/16 of the rate is lost at worst, and none below an MTU. The clock is read
 * for the stamp where the credit is looked at (police_share), when the packet's chain has no
 * reading yet: that reading decides the packet, so a window's packets read it once, as before;
 * on the coarse clock, not even that while a jiffies stamp says the window still runs
 * (nf/qos/stamp.h, "A window's credit without the clock"), and a packet bigger than the room its
 * CPU saw the window have when it last dropped one is dropped then from the line alone (stamp.h,
 * "A window seen full"); a window without the tick, on a reading before the U in ns its CPU's last
 * drop kept (stamp.h, "A window seen full in ns"). */
#ifndef DPP_NF_QOS_POLICE_H
#define DPP_NF_QOS_POLICE_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/qos.h"
#include "nf/qos/maps.h"
#include "nf/qos/clock.h"
#include "nf/qos/stamp.h"
#include "nf/qos/bucket.h"

#define NS_PER_S 1000000000ULL
/* The windows' packing: a window's number (its start >> s, 32 bits), whether it followed the window
 * before it directly (ADJACENT), and its bytes (at most 2^30 + a packet below 2^30: 31 bits). */
#define WINDOW_COUNT_MASK 0x7fffffffULL
#define WINDOW_ADJACENT (1ULL << 31)
/* police_step(): what follows a policer that dropped (no id: ids stay below DPP_MAX_POLICERS). */
#define POLICE_DROPPED 0xffffffffU

/* ---- windows: W = 2^s ns on the clock's grid; a window lets R x W / 8e9 bytes through ---- */

/* Whether `bytes` (the window's, this packet's included) fit: bytes x 8e9 <= R x 2^s, both sides
 * divided by 8 (s >= 10): exact. The count stays below 2^31, whatever the configuration says, so
 * that it never spills into the window's number. */
static __always_inline bool window_fits(const struct dpp_policer *p, __u64 bytes)
{
	return bytes <= DPP_POLICE_WINDOW_BYTES_MAX &&
	       bytes * NS_PER_S <= p->rate << (p->window_shift - 3);
}

static __always_inline __u64 window_pack(__u32 number, __u64 adjacent, __u64 bytes)
{
	return (__u64)number << 32 | adjacent | bytes;
}

/* Where a packet of window `number` counts, given the policer's window word `old`: in it when it is
 * that window or the one after (the packet read the clock just before another CPU moved on: it
 * counts in the newer window, which only tightens it); else a new window starts, empty. */
static __always_inline bool window_current(__u64 old, __u32 number)
{
	__u32 old_number = old >> 32;

	return number == old_number || number + 1 == old_number;
}

/* Whether a window whose bytes with the packet's are `total` (the sliding window: its estimate),
 * which fit, has room for `carve` more, for the packet's CPU's credit (0: none asked): total +
 * carve <= 2^30 + 2^20, then as window_fits. */
static __always_inline bool window_carves(const struct dpp_policer *p, __u64 total, __u32 carve)
{
	return carve && window_fits(p, total + carve);
}

/* Fixed window: a window's bytes, counted by compare-and-swap on the one word that holds the window
 * and its count, so that a window's start and its count change together and no two CPUs spend the
 * same room. Any W-long stretch of time spans two windows: at most 2 x R x W / 8e9 bytes pass
 * in it. A carve for the CPU's credit is counted with the packet, and only in the packet's own
 * window (not a newer one it counts in, late): the credit is stamped with that window. */
static __always_inline int fixed_window_pass(struct dpp_policer *p, __u64 bytes, __u64 now, __u32 carve)
{
	__u32 number = now >> p->window_shift, counted;
	__u64 old, count, take, next;
	int i;

	for (i = 0; i < POLICE_CAS_TRIES; i++) {
		old = *(volatile __u64 *)&p->window;
		if (window_current(old, number)) {
			counted = old >> 32;
			count = old & WINDOW_COUNT_MASK;
		} else {
			counted = number;
			count = 0;
		}
		if (!window_fits(p, count + bytes))
			return POLICE_DROP;
		take = window_carves(p, count + bytes, counted == number ? carve : 0) ? bytes + carve : bytes;
		next = window_pack(counted, 0, count + take);
		if (__sync_val_compare_and_swap(&p->window, old, next) == old)
			return take != bytes ? POLICE_CARVED : POLICE_PASS;
	}
	return POLICE_DROP;
}

/* The bytes of the window before the current one, weighted by the part of it that the sliding
 * window (the W ns up to now) still covers, W - t of W, rounded up to a byte. */
static __always_inline __u64 window_weighted(__u64 prev, __u64 t, __u8 shift)
{
	return (prev * ((1ULL << shift) - t) + (1ULL << shift) - 1) >> shift;
}

/* The count of window number - 1, as the CPU that started window `number` published it; false
 * while it has not yet (between its compare-and-swap and its store: a few ns). */
static __always_inline bool window_previous(const struct dpp_policer *p, __u64 old, __u64 *prev)
{
	__u64 published = *(volatile __u64 *)&p->previous;

	*prev = 0;
	if (!(old & WINDOW_ADJACENT))
		return true; /* an idle window or more before it: nothing to weigh */
	if ((__u32)(published >> 32) + 1 != (__u32)(old >> 32))
		return false;
	*prev = published & WINDOW_COUNT_MASK;
	return true;
}

/* A later window's count may be published already when it is at most this many windows later: the
 * CPU that started ours stores within the nanoseconds after its swap, softirq without preemption.
 * Anything else there (an old count, or the zero of a new policer) is older, however its number
 * compares: numbers wrap, so "later" is only "shortly after". */
#define WINDOW_PUBLISH_AHEAD (1U << 16)

/* Publish the count of the window that ended, numbered `number`, unless a later one is already
 * there (two CPUs that started consecutive windows may store in either order). */
static __always_inline void window_publish(struct dpp_policer *p, __u32 number, __u64 count)
{
	__u64 old, mine = window_pack(number, 0, count);
	int i;

	for (i = 0; i < POLICE_CAS_TRIES; i++) {
		old = *(volatile __u64 *)&p->previous;
		if ((__u32)(old >> 32) - number - 1 < WINDOW_PUBLISH_AHEAD)
			return;
		if (__sync_val_compare_and_swap(&p->previous, old, mine) == old)
			return;
	}
}

/* The sliding window's view of the policer's window word `old` for a packet of window `number`:
 * the window it counts in, that window's bytes and whether it follows its predecessor; prev the
 * predecessor's bytes when a new window starts here (published once the new window is in). */
struct window_view {
	__u32 number;
	__u64 adjacent, count, t, prev;
	bool starts;
};

static __always_inline bool window_look(const struct dpp_policer *p, __u64 old, __u32 number,
					__u64 now, struct window_view *v)
{
	v->t = now & ((1ULL << p->window_shift) - 1);
	v->starts = !window_current(old, number);
	if (v->starts) {
		v->number = number;
		v->adjacent = number == (__u32)(old >> 32) + 1 ? WINDOW_ADJACENT : 0;
		v->prev = v->adjacent ? old & WINDOW_COUNT_MASK : 0;
		v->count = 0;
		return true;
	}
	/* A late packet counts at the newer window's start: its predecessor all weighed. */
	if (number != (__u32)(old >> 32))
		v->t = 0;
	v->number = old >> 32;
	v->adjacent = old & WINDOW_ADJACENT;
	v->count = old & WINDOW_COUNT_MASK;
	return window_previous(p, old, &v->prev);
}

/* Sliding window: the bytes of the last W ns, estimated as the window before's weighted by how much
 * of it they cover plus the current window's, must stay within R x W (Cloudflare's estimate). The
 * current window's word changes by compare-and-swap as the fixed window's; the CPU whose swap
 * started a window knows exactly what the window before counted (no one adds to it after the swap)
 * and publishes it; a CPU that finds it not yet published drops (rare, and never lets more
 * through). */
static __always_inline int sliding_window_pass(struct dpp_policer *p, __u64 bytes, __u64 now, __u32 carve)
{
	__u32 number = now >> p->window_shift;
	struct window_view v;
	__u64 old, total, take, next;
	int i;

	/* Unrolled: laid out as a loop, its latch falls through into its head, a back edge that 6.1's
	 * verifier (Debian 12) refuses ("back-edge from insn"): it takes a loop's back edge from a jump
	 * only. */
#pragma unroll
	for (i = 0; i < POLICE_CAS_TRIES; i++) {
		old = *(volatile __u64 *)&p->window;
		if (!window_look(p, old, number, now, &v))
			return POLICE_DROP;
		total = window_weighted(v.prev, v.t, p->window_shift) + v.count + bytes;
		if (!window_fits(p, total)) /* total >= count + bytes: the count fits too */
			return POLICE_DROP;
		take = window_carves(p, total, v.number == number ? carve : 0) ? bytes + carve : bytes;
		next = window_pack(v.number, v.adjacent, v.count + take);
		if (__sync_val_compare_and_swap(&p->window, old, next) != old)
			continue;
		if (v.starts && v.adjacent)
			window_publish(p, number - 1, v.prev);
		return take != bytes ? POLICE_CARVED : POLICE_PASS;
	}
	return POLICE_DROP;
}

/* ---- the policer ---- */

/* The time policer p decides on: the chain's reading *now, or when there is none yet (0) p's own
 * clock's, read now and kept for the next policer (the file's head: "The clock"; the coarse one a
 * load while its timer keeps it: nf/qos/clock.h). */
static __always_inline __u64 police_clock(const struct dpp_policer *p, __u64 *now)
{
	if (!*now)
		*now = p->clock == DPP_POLICE_CLOCK_COARSE ? clock_coarse() : bpf_ktime_get_ns();
	return *now;
}

/* The windows' CPU credit, a constant at each call of the policers: with it, a window policer's
 * credit is looked at, stamped and carved as the buckets' is (the file's head, "The CPUs' credit");
 * without it (!POLICE_WINDOW_CREDIT: dpp_upf_police, whose frame has no room for it) a window is
 * decided on its shared word alone, and none of that is compiled there. */
#define POLICE_WINDOW_CREDIT true

/* Whether policer p counts in windows: its CPUs' credits then hold for one window each. */
static __always_inline bool police_windowed(const struct dpp_policer *p)
{
	return p->algo == DPP_POLICE_ALGO_FIXED_WINDOW || p->algo == DPP_POLICE_ALGO_SLIDING_WINDOW;
}

/* A window policer's CPU credit `s` is its window's: one of another window than the packet's is
 * dropped (counted in its own window, it may pass nothing in this one), and the line is stamped
 * with the packet's window, the one a carve for this packet is counted in (a packet carves only in
 * its own window: fixed_window_pass), its window seen full forgotten. The clock is read here, when
 * the chain has no reading yet (police_clock), and that reading decides the packet; but not while
 * the line's jiffies stamp holds (a ticked policer, with a chunk or not: nf/qos/stamp.h), which says
 * the clock is still in the line's window: the credit stands as it is, and a packet of `bytes` it
 * does not cover, bigger than the room the window was seen with (window_saw_full), is to be
 * dropped: true. Asked here, so that a bucket's pass on its credit tests nothing more than before. */
static __always_inline bool police_credit_window(const struct dpp_policer *p, struct dpp_policer_stats *s,
						 __u64 *now, __u64 bytes)
{
	__u64 window, jiffies;

	if (!(s->chunk || police_ticked(p)))
		return false;
	if (police_ticked(p)) {
		jiffies = POLICE_JIFFIES();
		if (police_stamp_holds(s->stamp, jiffies))
			return s->credit < bytes && bytes > ~s->short_credit;
		/* kept in the line, pending, until the stamp is made of them (stamp.h's head) */
		s->stamp = police_stamp_pending(*now ? POLICE_GIVEN_JIFFIES(jiffies) : jiffies);
	}
	window = police_clock(p, now) >> p->window_shift;
	if (s->credit_window != window) {
		s->credit = 0;
		s->credit_window = window;
		s->short_credit = 0;
	}
	if (police_ticked(p))
		s->stamp = police_stamp(p, *now, s->stamp);
	return false;
}

/* Keeps in this CPU's line (`at`) the room its window had when its packet was dropped, on a
 * reading `now` of the line's stamped window (nf/qos/stamp.h, "A window seen full"). */
static __always_inline void window_saw_full(const struct dpp_policer *p, const __u32 *at, __u64 now)
{
	struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);
	__u64 old = *(volatile __u64 *)&p->window, number = now >> p->window_shift, prev = 0;

	if (!s || s->credit_window != number || (__u32)(old >> 32) != (__u32)number)
		return;
	if (p->algo == DPP_POLICE_ALGO_SLIDING_WINDOW)
		window_previous(p, old, &prev); /* 0 while not published: a larger room */
	s->short_credit = police_seen_room(p, old & WINDOW_COUNT_MASK, prev);
}

/* The first time of window `number` at which the sliding window, whose word counts `count` bytes
 * and weighs `prev` of the window before, has room for `bytes` (nf/qos/stamp.h, "A window seen
 * full in ns"): the window's end when the count alone leaves less; 0 (none) when it has room from
 * the window's start (nothing weighed, or too little: a drop that was no count's, a lost
 * compare-and-swap). */
static __always_inline __u64 sliding_window_fits_at(const struct dpp_policer *p, __u64 number, __u64 count,
						    __u64 prev, __u64 bytes)
{
	__u64 room = ~police_seen_room(p, count, 0), width = 1ULL << p->window_shift, gone;

	if (room < bytes)
		return (number << p->window_shift) + width;
	if (!prev)
		return 0;
	/* the weight ceil(prev (W - t) / W) > room - bytes while W - t > gone; (room - bytes) x W < 2^63 */
	gone = ((room - bytes) << p->window_shift) / prev;
	return gone < width ? (number << p->window_shift) + width - gone : 0;
}

/* Keeps in this CPU's line (`at`) of an unticked window, after it dropped a packet of `bytes` on a
 * reading `now`, the U in ns before which no packet bigger than a room has it (nf/qos/stamp.h, "A
 * window seen full in ns"), as the word shows the reading's window (window_look: counted, or yet
 * to start from its count 0; a reading behind the word's window keeps nothing): the fixed window's
 * end with the room its count leaves; the sliding window's first time it has room for the packet,
 * with the room below it. */
static __always_inline void window_saw_until(const struct dpp_policer *p, const __u32 *at, __u64 now,
					     __u64 bytes)
{
	struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);
	__u64 old = *(volatile __u64 *)&p->window, number = now >> p->window_shift;
	struct window_view v;

	if (!s || !window_look(p, old, number, now, &v) || v.number != (__u32)number)
		return;
	if (p->algo == DPP_POLICE_ALGO_FIXED_WINDOW)
		police_keep_until(s, ~police_seen_room(p, v.count, 0), now, (number + 1) << p->window_shift);
	else
		police_keep_until(s, bytes - 1, now, sliding_window_fits_at(p, number, v.count, v.prev, bytes));
}

/* Whether policer p's packet of `bytes`, its credit short, is dropped on the U in ns its CPU's
 * line `s` keeps (nf/qos/stamp.h, "A bucket seen short in ns", "A window seen full in ns"): the
 * clock read only for a packet bigger than the room (a zeroed line's room is all ones: no read),
 * that reading kept for the decision when the packet is not dropped (police_clock); a ticked
 * bucket's jiffies left pending (bucket_line_drops) let go when it is. */
static __always_inline bool police_until_drops(const struct dpp_policer *p, struct dpp_policer_stats *s,
					       __u64 *now, __u64 bytes)
{
	if (bytes <= ~s->short_credit || !police_until_short(s, bytes, police_clock(p, now)))
		return false;
	bucket_unpend(s);
	return true;
}

/* Whether a packet of `bytes` is dropped from its CPU's line `s` of policer p alone: a ticked
 * window's seen full (police_credit_window, which keeps the line's credit its window's first); for
 * a packet its credit does not cover, a ticked bucket's seen short by jiffies (bucket_line_drops),
 * a bucket's or an unticked window's U in ns (police_until_drops). */
static __always_inline bool police_line_drops(const struct dpp_policer *p, struct dpp_policer_stats *s,
					      __u64 *now, __u64 bytes)
{
	if (police_windowed(p) && police_credit_window(p, s, now, bytes))
		return true;
	if (s->credit >= bytes || (police_windowed(p) && police_ticked(p)))
		return false;
	if (bucket_tick(p) && bucket_line_drops(s, now, bytes))
		return true;
	return police_until_drops(p, s, now, bytes);
}

/* police_share(): the packet passed on its CPU's credit, counted (chunks are smaller); dropped from
 * its line alone (police_line_drops), counted. */
#define POLICE_SPENT 0xffffffffU
#define POLICE_FULL 0xfffffffeU

/* Where this CPU's share of policer `id` is in dpp_policer_stats (its row, then the id). An id past
 * the row would land on the next CPU's row: it gets an index past the map, not counted. */
static __always_inline __u32 police_share_index(__u32 id)
{
	__u32 slots = cfg_policer_slots; /* volatile: read once, not once a use */

	if (id >= slots)
		return POLICE_DROPPED;
	return bpf_get_smp_processor_id() * slots + id;
}

/* This CPU's share of a policer (its counters' line, *at: police_share_index), read as soon as the
 * policer is found: a packet its credit covers passes on it, counted, without the policer's shared
 * state (POLICE_SPENT; an open gate asked: a closed one drops whatever a CPU holds); any other gets
 * what its credit lacks of its chunk (0: no chunk), for police_decide to carve. Read first also so
 * that a cold policer's counters' line comes in while its own line does: counted only after the
 * decision, whose lock or compare-and-swap waits for the policer's line, it was asked for then,
 * misses one after the other (bench/README.md, "bench/qos"). The pointer is not kept: alive across
 * the decision it took 16 bytes more of stack than dpp_upf_police had before the entry's frame was cut; police_count's own
 * lookup then finds the line in cache. */
static __always_inline __u32 police_share(const struct dpp_policer *p, const __u32 *at, __u64 bytes,
					  __u64 *now, bool window_credit)
{
	struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);

	if (!s)
		return 0;
	if (window_credit && police_line_drops(p, s, now, bytes)) {
		s->dropped_packets++;
		s->dropped_bytes += bytes;
		return POLICE_FULL;
	}
	if (s->credit < bytes || p->gate != DPP_POLICE_GATE_OPEN) {
		if (!window_credit && police_windowed(p))
			return 0; /* nothing to work out: police_decide gives such a window no carve */
		return s->credit < s->chunk ? s->chunk - s->credit : 0;
	}
	s->credit -= bytes;
	s->passed_packets++;
	s->passed_bytes += bytes;
	return POLICE_SPENT;
}

/* Counts the packet as decided; a carve fills this CPU's credit up to its chunk (the chunk the slot
 * holds now: one written afresh meanwhile, with its policer, is that policer's); no bucket's
 * jiffies left pending (bucket_line_drops; a window's credit_window is a window's number, never
 * pending). */
static __always_inline void police_count(const __u32 *at, __u64 bytes, int verdict)
{
	struct dpp_policer_stats *s = bpf_map_lookup_elem(&dpp_policer_stats, at);

	if (!s)
		return;
	bucket_unpend(s); /* a bucket's, decided: no stamp to make now */
	if (verdict == POLICE_DROP) {
		s->dropped_packets++;
		s->dropped_bytes += bytes;
		return;
	}
	s->passed_packets++;
	s->passed_bytes += bytes;
	if (verdict == POLICE_CARVED)
		s->credit = s->chunk;
}

/* The decision on the policer's shared state; `carve`: what to carve for the CPU's credit when the
 * bucket or the window holds it too (a window's only with `window_credit`: POLICE_WINDOW_CREDIT). */
static __always_inline int police_decide(struct dpp_policer *p, __u64 bytes, __u64 now, __u32 carve,
					 const __u32 *at, bool window_credit)
{
	if (p->gate != DPP_POLICE_GATE_OPEN || bytes > DPP_POLICE_BURST_MAX)
		return POLICE_DROP;
	switch (p->algo) {
	case DPP_POLICE_ALGO_TOKEN_BUCKET:
		return bucket_pass(p, bytes, now, carve, at, window_credit);
	case DPP_POLICE_ALGO_FIXED_WINDOW:
		return fixed_window_pass(p, bytes, now, window_credit ? carve : 0);
	case DPP_POLICE_ALGO_SLIDING_WINDOW:
		return sliding_window_pass(p, bytes, now, window_credit ? carve : 0);
	case DPP_POLICE_ALGO_GCRA:
		return gcra_pass(p, bytes, now, carve, at, window_credit);
	}
	return POLICE_DROP;
}

/* The rest of police_step for a packet its CPU's credit did not cover (`carve`: police_share's),
 * at *at (police_share_index): the decision on the policer's shared state, counted; what follows. */
static __always_inline __u32 police_on_state(struct dpp_policer *p, const __u32 *at, __u64 bytes,
					     __u64 *now, __u32 carve, bool window_credit)
{
	int verdict = police_decide(p, bytes, police_clock(p, now), carve, at, window_credit);

	police_count(at, bytes, verdict);
	if (verdict != POLICE_DROP)
		return p->parent;
	if (!window_credit || !police_windowed(p) || p->gate != DPP_POLICE_GATE_OPEN)
		return POLICE_DROPPED;
	if (police_ticked(p))
		window_saw_full(p, at, *now);
	else
		window_saw_until(p, at, *now, bytes);
	return POLICE_DROPPED;
}

/* Policer *id's decision on a packet of `bytes`, counted (*id then this CPU's index of its
 * counters, police_share_index: the slot the id took, so that the frame keeps its size): what
 * follows it, its parent when it passed (0: none), POLICE_DROPPED when it dropped. Id 0, an id past
 * the map and an empty slot (ALGO_NONE) police nothing: 0, uncounted (a parent emptied before its children are rewritten too). *now 0:
 * the policer's clock, read once a policer is found (which keeps one value fewer alive across the
 * lookup; and the policer says which clock), kept for the parent (police_clock); a packet a
 * bucket's CPU credit covers reads none (police_share; a window's credit needs the reading, to
 * know it is the window's), and its parent then reads its own. The decision and
 * the parent leave together, so that what is alive across police_count's lookup fits the registers
 * a call keeps: dpp_upf_police's frame is at the size that fills the 512 bytes of stack with
 * dpp_xdp's and dpp_upf_sdf's, each rounded to 32 as kernels before 6.9 count them (bench/stack.py). */
static __always_inline __u32 police_step(__u32 *id, __u64 bytes, __u64 *now, bool window_credit)
{
	struct dpp_policer *p = bpf_map_lookup_elem(&dpp_policers, id);
	__u32 carve;

	if (!p || p->algo == DPP_POLICE_ALGO_NONE)
		return 0;
	*id = police_share_index(*id);
	carve = police_share(p, id, bytes, now, window_credit);
	if (carve == POLICE_SPENT)
		return p->parent;
	if (window_credit && carve == POLICE_FULL)
		return POLICE_DROPPED;
	return police_on_state(p, id, bytes, now, carve, window_credit);
}

/* Whether a packet of `bytes` at clock *now (ns; 0: the first policer's clock, then its reading,
 * kept for a next policer: police_clock) passes policer `id` and its parent
 * (struct dpp_policer.parent: a flow's MBR, then the session's AMBR that its flows share), each
 * counted; a parent's own parent is not followed (DPP_POLICE_DEPTH, which keeps the verifier's walk
 * at two policers; the control plane refuses a deeper chain).
 *
 * The child decides first and only a packet it passes is offered to the parent: a packet the child
 * drops takes nothing from the parent, so the flows under their own rates share the whole AMBR. A
 * packet the child passes and the parent drops keeps what it took from the child (tokens, or its
 * bytes in the window), as RFC 2698's meters do: a meter charges a packet by the colour it gives
 * it, and a later stage's drop does not re-colour it there (TS 23.501 5.7.2.5 and 5.7.2.6 ask the
 * UPF to enforce the flow's MBR and the Session-AMBR, and say nothing of giving room back). So a
 * chain never lets through more than either policer alone would; while the AMBR drops, a flow's
 * own room is spent on what did not leave (it resumes at its rate, its burst refilling). Giving it
 * back would take the child's lock or a second compare-and-swap, not always possible (its window
 * may have moved on), exactly when the session is over its AMBR. The child's counters say what it
 * decided; what left is what the parent passed. The clock is read once for both, the child's. */
static __always_inline bool police_at(__u32 id, __u64 bytes, __u64 *now, bool window_credit)
{
	__u32 next;

	if (!id)
		return true;
	next = police_step(&id, bytes, now, window_credit);
	if (!next || next == POLICE_DROPPED)
		return !next;
	id = next;
	return police_step(&id, bytes, now, window_credit) != POLICE_DROPPED;
}

/* police_at with a time of its own: the chain's reading is not wanted after it. */
static __always_inline bool police(__u32 id, __u64 bytes, __u64 now, bool window_credit)
{
	return police_at(id, bytes, &now, window_credit);
}

#endif /* DPP_NF_QOS_POLICE_H */
