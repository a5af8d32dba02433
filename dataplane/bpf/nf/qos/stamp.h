/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A window's credit without the clock (struct dpp_policer_stats.stamp), for nf/qos/police.h's
 * windows on their CPUs' credit (its head, "The CPUs' credit"). Reading the clock is most of what
 * is left of a window's pass on its credit (bpf_ktime_get_coarse_ns some 25 ns a call on a VM that
 * day, 14-16 on another, police.h's "The clock"; bpf_jiffies64 0-2: inlined by the verifier;
 * bench/README.md, "A window's credit by jiffies"). So a window on the COARSE clock whose control
 * plane wrote the kernel's tick (struct dpp_policer.interval, TICK: clock_getres of
 * CLOCK_MONOTONIC_COARSE) stamps its CPU's line, when it reads the clock, with a jiffies deadline D
 * at most its window's end E = (k + 1) W:
 *   D = j0 + floor((E - c0) / TICK) - 4      (0, none, when that is not past j0)
 * c0 the reading, j0 the jiffies read just before it; a packet whose jiffies are at most D then
 * spends the credit (or finds it short, or its window full: "A window seen full", below) without
 * reading the clock, as one of window k.
 *   Why, from the jiffies against the coarse clock alone (not against the real time, which a VM's
 * vCPU scheduling may hold both off from for any while: what such a stall does, it does to both).
 * Both are moved by the same timekeeping update, on one CPU, one after the other
 * (tick_do_update_jiffies64, then update_wall_time; tick_periodic likewise): an update at clock
 * source time T sets the jiffies to the last multiple of TICK at or before T on their grid, J(j) <=
 * T < J(j) + TICK (jiffies j stand for the time J(j) = J(j') + (j - j') TICK of their tick), then
 * the coarse clock to the last step of its own grid before its own reading T' >= T, T' - TICK < c
 * <= T' (its steps are the tick's length within NTP's 500 ppm, which the margin's ticks absorb).
 * So at any moment the coarse clock is less than a tick (and the few us between the update's two
 * readings, e) ahead of the jiffies' time:   c < J(j) + TICK + e,   and, outside the update's two
 * writes, not more than a tick behind it:   J(j) < c + TICK.   A packet at jiffies j <= D, had it
 * read the clock when it read them, would have read
 *   c < J(j) + TICK + e <= J(j0) + (D - j0) TICK + TICK + e <= J(j0) + (E - c0) - 3 TICK + e
 *     < c0 + TICK + (E - c0) - 3 TICK + e = E - 2 TICK + e < E
 * (J(j0) < c + TICK for the clock c at the moment j0 was read, c <= c0 read after them): a time of
 * window k, and never one before it (c >= c0: the clock never goes back). So whatever a credit
 * passes, it passes in the window it was counted in: the allowance bound (at most A a window, 2 A
 * in any W-long stretch) is the clock's. The one case outside the argument: j0 read between an
 * update's two writes (the jiffies moved by its n ticks, the clock not yet: J(j0) < c + (n + 1)
 * TICK), which leaves c < E + (n - 2) TICK + e: covered for n = 1, an update of one tick; an update
 * catching up more (its CPU held off that long) read between its two stores (microseconds apart in
 * one hardirq, unless a hypervisor stops the vCPU right there) may let that stamp outlive its
 * window by n - 2 ticks and e, and what the CPUs hold (N C at most) pass in the window after the
 * one it was counted in.
 *   A stamp that expires early costs a clock read, not bytes: the packet then reads the clock, and
 * a credit of its window is kept and stamped afresh (the last four ticks or so of a window read the
 * clock, 1/8 of a window of 32 ticks, the shortest the control plane puts on the coarse clock); what
 * is lost is what was lost before, the carve a window ends with (a window passes A - N C - a packet
 * at least: police.h's head). Only the COARSE clock: a PRECISE policer relies on no tick, and its
 * windows are short beside the tick (under 32) where four ticks leave little. Only a reading of its
 * own: the chain's (a reading taken before, by the policer before) has no jiffies read just before
 * it and stamps none (D 0). TICK is read from the kernel the data path runs on by the control plane
 * when it writes the policer (a container shares the kernel; HZ is that kernel's build constant,
 * and a reboot reloads the data plane, whose policers are written afresh): a TICK written larger
 * than the kernel's expires stamps earlier, never later; 0 stamps none.
 *   While it reads the clock, a CPU keeps j0 in the stamp's word (alive across the clock read in a
 * register, they would take 16 bytes more of dpp_xdp's stack, which has none), marked pending
 * (POLICE_STAMP_PENDING, the top bit): a program run on the same CPU meanwhile (a packet's XDP
 * program interrupting a BPF_PROG_TEST_RUN that is not live) finds a word no jiffies pass (the
 * check's difference is 2^63 less the jiffies since) and reads the clock itself, rather than taking
 * the credit on the jiffies of a reading not yet made. A word found no longer pending when the
 * reading is made (that program stamped it meanwhile) makes no stamp: its jiffies are not this
 * reading's. A stamp is trusted only within POLICE_STAMP_AHEAD ticks ahead. The field is a
 * bucket's U in ns too ("A bucket seen short in ns", below), kept with the bit POLICE_UNTIL_TAG
 * (2^62) set: 2^62 and more ahead of any jiffies, it is no jiffies stamp, and a word without the
 * bit (jiffies, pending or not; 0) is no U (police_until_holds). */
#ifndef DPP_NF_QOS_STAMP_H
#define DPP_NF_QOS_STAMP_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/qos.h"

/* The jiffies (bpf_jiffies64: the tick count, inlined by the verifier, no clock read), and those
 * read just before a reading the caller gave (the chain's: none, 0, so that no stamp is made on
 * it). xdp_police.bpf.c defines both for its tests: a jiffies count given with the time. */
#ifndef POLICE_JIFFIES
#define POLICE_JIFFIES() bpf_jiffies64()
#define POLICE_GIVEN_JIFFIES(jiffies) 0
#endif

/* A stamp further ahead of the jiffies than this is none (this file's head): a window's end is at
 * most 2^32 ns away, 4,295 ticks at HZ=1000. */
#define POLICE_STAMP_AHEAD (1ULL << 16)
/* The ticks a stamp keeps off its window's end: two for the bound, two spare (this file's head). */
#define POLICE_STAMP_MARGIN 4
/* The jiffies of a reading being made, kept in the stamp's word: no check passes them (this file's
 * head). */
#define POLICE_STAMP_PENDING (1ULL << 63)

/* Whether window policer p's CPU credit may be stamped with jiffies: on the coarse clock, with the
 * kernel's tick written (struct dpp_policer.interval). */
static __always_inline bool police_ticked(const struct dpp_policer *p)
{
	return p->clock == DPP_POLICE_CLOCK_COARSE && p->interval;
}

/* Whether a line's stamp holds at `jiffies`: not past them, nor further ahead than
 * POLICE_STAMP_AHEAD (none, 0, and a pending word never hold). */
static __always_inline bool police_stamp_holds(__u64 stamp, __u64 jiffies)
{
	return stamp - jiffies < POLICE_STAMP_AHEAD;
}

/* The word a CPU keeps the jiffies read before its clock reading in (0, unknown: none). */
static __always_inline __u64 police_stamp_pending(__u64 jiffies)
{
	return jiffies | POLICE_STAMP_PENDING;
}

/* The jiffies deadline `ticks` whole ticks after a reading, `pending` the word police_stamp_pending
 * made of the jiffies read just before it, less POLICE_STAMP_MARGIN: 0 (none) when that is not past
 * the jiffies, they are unknown (0), or the word is no longer pending (another program's since). */
static __always_inline __u64 police_stamp_after(__u64 pending, __u64 ticks)
{
	__u64 jiffies = pending & POLICE_STAMP_PENDING ? pending - POLICE_STAMP_PENDING : 0;

	return jiffies && ticks > POLICE_STAMP_MARGIN ? jiffies + ticks - POLICE_STAMP_MARGIN : 0;
}

/* The jiffies deadline of a credit of the window of reading `now` (clock ns, ticked policer p),
 * `pending` the word police_stamp_pending made of the jiffies read just before it: at most the
 * window's end less POLICE_STAMP_MARGIN ticks, in whole ticks; 0 (none) when that is not past the
 * jiffies, they are unknown (0), or the word is no longer pending (another program's since). */
static __always_inline __u64 police_stamp(const struct dpp_policer *p, __u64 now, __u64 pending)
{
	__u64 width = 1ULL << p->window_shift;

	return police_stamp_after(pending, (width - (now & (width - 1))) / p->interval);
}

/* The word of a window seen full: ~ the room a window of `count` bytes (the sliding window: `prev`
 * the window before's, 0 for the fixed one) has at most while a stamp made in it holds. A window
 * seen full (struct dpp_policer_stats.short_credit of a ticked window, stored inverted, ~room, so
 * that the zeroed line of a policer just written holds no room seen, and a bucket's nanobits left
 * there read as a room no packet exceeds). The clock read is most of what a window's drop costs
 * (bench/README.md, "A policed rule taken apart"), and a window found full stays so: a CPU whose
 * packet a ticked window dropped, on a reading of the line's stamped window k, keeps the room it
 * saw, and while its stamp holds, a packet its credit does not cover and bigger than that room is
 * dropped from the line alone (police.h's police_share): no clock read, no look at the shared
 * word, and in a rule no call. Exact: while the stamp holds, the packet's reading would be c0 <= c
 * < E - TICK (this file's head: c < E - 2 TICK + e), of window k, where the shared word counts
 * window k (none moved it on: a reading of window k + 1 made before ours would make ours one too)
 * with at least the bytes it counted at the drop (a window's count only grows), so the fixed
 * window's room then is at most A - count, and the sliding window's at most A - count - ceil(prev
 * TICK / W), the weight of the window before being at least that with W - t > TICK left (prev 0
 * when not yet published: a larger room). A packet bigger is one the word drops too: none is
 * dropped that the exact algorithm would pass. (A window word started afresh by a reading two
 * windows late, which lets a window pass more than A, is the exception: such a packet is dropped
 * here, within A.) The room is kept only with the line's window that of the reading and of the
 * word (a word already on the next window: the stamp cannot hold any more: police.h's
 * window_saw_full), forgotten with the window (police_credit_window), and used only under a stamp
 * made in it. */
static __always_inline __u64 police_seen_room(const struct dpp_policer *p, __u64 count, __u64 prev)
{
	__u64 allowance = (p->rate << (p->window_shift - 3)) / 1000000000ULL; /* as window_fits */
	__u64 held = count + ((prev * p->interval + (1ULL << p->window_shift) - 1) >> p->window_shift);

	if (allowance > DPP_POLICE_WINDOW_BYTES_MAX)
		allowance = DPP_POLICE_WINDOW_BYTES_MAX;
	return ~(allowance > held ? allowance - held : 0); /* prev x TICK < 2^31 x 2^27 */
}

/* A bucket seen short by jiffies. The buckets (TOKEN_BUCKET, GCRA) are put on the COARSE clock by
 * the control plane where their burst holds two ticks' refill and a packet (netapp/qos/applier.py,
 * clock_for), which is where the coarse clock is a valid one for them: it steps a tick's refill D
 * in at once, and a stretch of T ns then passes at most R T / 8e9 + B + 2 D, the rate over time
 * exact, none of a step's refill lost while B >= 2 D + a frame (police.h's head, "The clock"). On that
 * clock, with the kernel's tick written (struct dpp_policer.previous, which neither bucket uses
 * otherwise), a CPU whose packet of b bytes its bucket dropped, on a reading c0 of its own with the
 * jiffies j0 read just before it (pending in the line's credit_window, which buckets do not use
 * otherwise), keeps in its line the time U from which the bucket may hold b bytes, as a jiffies
 * stamp, and the room b - 1 (~ in short_credit, as a window's room seen): while the stamp holds, a packet its credit does not cover
 * and bigger than b - 1 is dropped from the line alone: no clock read, no lock or shared word, in a
 * rule no call (the same test as a window seen full, police.h's police_line_drops).
 *   U. Token bucket: the lock left it holding c nanobits at t0 (its last_ns then, >= c0), c < 8e9 b.
 * Later it holds at most c + (L - t0) R, L the latest reading it has taken (its last_ns: refills
 * add the elapsed time's, the other CPUs' packets only take; a reading behind L refills nothing).
 * While every reading it takes is coarse, L is at most the coarse clock, one clock for every CPU:
 * at coarse readings below U = t0 + ceil((8e9 b - c) / R) it holds less than b bytes, and less than
 * any b' >= b. A precise reading (a precise child's for a coarse parent, a precise own policer's
 * for a coarse slice policer: police.h) may be two ticks ahead of the coarse clock and refill what
 * the stamp says is not there, so the control plane writes no tick for a token bucket a precise
 * policer reads for (netapp/qos/applier.py, _untick). GCRA's TAT only grows, whatever the reading. Largest values: 8e9 b - c + R < 2^30 x
 * 8e9 + 2^39 < 2^63; the quotient at most 8.6e18 / 8e3 (8 kb/s) = 1.1e15 ns, added to t0 < 2^62.
 * GCRA: it dropped because TAT > 64 c0 + room(b), room(b) = floor((B - b) I / 2^20) (gcra_room);
 * the TAT only grows and room(b') <= room(b) for b' >= b: below U = ceil((TAT - room(b)) / 64)
 * every packet of b bytes or more is dropped (TAT - room(b) > 64 c0 >= 0, below 2^64: police.h's
 * head). A packet of more than B bytes, which neither bucket ever holds: U is never, and the stamp
 * POLICE_STAMP_AHEAD - 1 ticks out less the margin (a new policer's written lines clear it).
 *   The stamp: D = j0 + min(floor((U - c0) / TICK), POLICE_STAMP_AHEAD - 1) - POLICE_STAMP_MARGIN
 * (0, none, when not past j0), this file's head's with U for the window's end E: a packet at
 * jiffies j <= D would have read c < U - 2 TICK + e < U, a time before U, and (c >= c0) not before
 * the drop's reading: a packet of b bytes or more then is one the bucket drops. None is dropped
 * that the bucket would pass, its readings all coarse (the head's one case outside the argument, an update catching up n >=
 * 2 ticks read between its two stores, may drop such packets n - 2 ticks late; it never passes
 * one). The jiffies are kept pending while the clock is read and the decision made, made the stamp
 * when the bucket drops, and cleared once it decided (police.h's police_count): a program run on
 * the CPU meanwhile finds no stamp, and leaves none pending for this reading to take as its own.
 * Where no stamp can be made (below), the line keeps U in ns instead ("A bucket seen short in ns",
 * below), as on the PRECISE clock: the two share stamp and short_credit (~room for both), and are
 * told apart by the stamp's POLICE_UNTIL_TAG (the head).
 * A packet a stamp that holds does not drop (b - 1 bytes or less) goes to the bucket with the
 * jiffies pending: the bucket's drop of it replaces the stamp with its own (a room below b - 1,
 * still the bucket's: the argument holds for any b), or, where it makes none, keeps the one that
 * holds; a pass leaves it (the bucket only lost bytes since).
 *   What it reaches: a stamp needs U - c0 over POLICE_STAMP_MARGIN + 1 ticks: the bucket's time to
 * hold b bytes beyond 5 ticks (20 ms at HZ=250, 5 at 1000), a packet's time at the rate when the
 * bucket is empty: 1500-byte packets below 600 kb/s at HZ=250 (2.4 Mb/s at 1000), 64-byte ones below
 * 25.6 kb/s (102 kb/s). Above, a bucket refills a packet within a tick, the jiffies say the coarse
 * clock is within two ticks of the drop's reading, not on it, and every drop reads the clock. So
 * the control plane writes the tick only where the largest frame (a page) can be stamped, or a
 * frame can be bigger than the bucket (netapp/qos/applier.py, bucket_tick_for: below 1.64 Mb/s at
 * HZ=250, 6.6 at 1000): elsewhere a drop reads no jiffies and keeps nothing pending, and its line
 * keeps U in ns (below). On the PRECISE clock nothing of the kind holds: bpf_ktime_get_ns moves
 * every ns, and what a line may hold of a time without reading it is only the jiffies, a tick's
 * resolution, which says nothing of a bucket refilled within the tick: no jiffies stamp there. */

/* The jiffies deadline up to which the clock stays before `until` (ns), a bucket's U at the reading
 * `now` of ticked bucket policer p (its tick: struct dpp_policer.previous), `pending` the word the
 * line kept the jiffies read before `now` in: police_stamp_after's, POLICE_STAMP_AHEAD - 1 ticks at
 * most (U never: all ones), 0 for an `until` not past `now` (none). */
static __always_inline __u64 police_stamp_until(const struct dpp_policer *p, __u64 now, __u64 until, __u64 pending)
{
	__u64 ticks = until > now ? (until - now) / p->previous : 0;

	return police_stamp_after(pending, ticks < POLICE_STAMP_AHEAD ? ticks : POLICE_STAMP_AHEAD - 1);
}

/* A bucket seen short in ns. A bucket's drop where no jiffies stamp is made (a bucket without the
 * tick: on the PRECISE clock, or COARSE at realistic rates, above bucket_tick_for's; a ticked one
 * whose U is within the margin's ticks) keeps in its CPU's line U itself, in ns (stamp), with the
 * room b - 1 (~ in short_credit), U the time from which the bucket may hold the dropped packet's b
 * bytes ("A bucket seen short by jiffies": the token bucket's ceil((8e9 b - c) / R) after its
 * last_ns, GCRA's ceil((TAT - room(b)) / 64)). A packet its credit does not cover and bigger than
 * the room, on a reading t of its policer's clock with t < U, is dropped from the line alone
 * (police.h's police_line_drops): one clock read, and no shared line, no lock or compare-and-swap,
 * in a rule no call of dpp_police_rule. The read is the one the bucket's decision takes anyway: a
 * packet the line does not drop keeps it for the bucket (the chain's reading), so what a drop saves
 * is all but the clock. A jiffies stamp cannot do that at these rates: there the bucket holds a
 * packet again within a tick, and the jiffies place the coarse clock only to within two ticks.
 *   Why each such drop is one the bucket makes. GCRA: its TAT only grows (other CPUs' packets
 * raise it, readings in any order), room(b') <= room(b) for b' >= b, and at t < U, 64 t < TAT0 -
 * room(b) <= TAT - room(b'): a packet of b' bytes finds TAT - 64 t > room(b'), dropped, whatever
 * the clock. Token bucket: at a reading t it holds at most c + (max(t, L) - t0) R, L the latest
 * reading it took, t0 <= L (refills add the elapsed time's, packets only take); for t < U and
 * L < U that is below 8e9 b <= 8e9 b': dropped. So for readings in order (one CPU, or the model's
 * replay) every line-only drop is the bucket's, to the ns: U is the least time at which the bucket
 * holds b bytes (at U - 1 it does not). A reading behind another's later one (L > t: another CPU's
 * precise reading, a precise child's for a coarse bucket), which the lock refills nothing for, may
 * find up to (L - t) R of refill that the line does not count: such a packet may be dropped where
 * the lock would pass it, never passed where it drops it (as the bound seen short this replaces,
 * which kept c at t0 and tested c + (t - t0) R against the packet's cost).
 *   Largest values, 8 kb/s to 400 Gb/s: the token bucket's 8e9 b - c + R - 1 < 2^30 x 8e9 + 2^39 <
 * 2^63, its quotient at most 8.6e18 / 8e3 = 1.1e15 ns (400 Gb/s: 2 ns for 64 bytes), added to
 * last_ns < 2^62; GCRA's (TAT - room) / 64 < 2^58; U kept at most POLICE_UNTIL_AHEAD past the
 * reading (t + 2^26 < 2^63 for a clock below 2^62 ns), so that a U of never (b > B, all ones) or of
 * a slow bucket holds 67 ms, and then the bucket decides again and stamps afresh (a lock or a
 * compare-and-swap every 67 ms for a slow bucket's drops; and a U a rewrite's race leaves in the new
 * policer's line, below, drops for 67 ms at most). Told apart from
 * other words in the same fields (a ticked bucket's jiffies stamps; a rewrite's race, as the control
 * plane zeroes the lines around it): a U is kept as U | POLICE_UNTIL_TAG (U < 2^62: a clock below
 * 146 years), and a stamp holds as a U only with the tag and within (t, t + 2^26] of the reading,
 * one unsigned compare: jiffies, pending or not, and 0 have no tag (their difference wraps), a
 * window's pending word (2^63 | j) less the tag is 2^62 ahead; short_credit 0 is the room all ones,
 * which no packet exceeds. A holding U is
 * replaced by the bucket's next drop on that CPU (a packet within the room, or after U: its own U
 * and room). The pair is two plain stores, as the bound's was: a program run between them on the
 * same CPU (a test run interrupted by a packet) may leave one drop's room with another's U, not
 * guarded. */

/* A window seen full in ns. The same for a window without a tick (the PRECISE clock, where "A
 * window seen full" has no jiffies stamp; any clock: the argument is on readings in ns), whose
 * drop on a reading t0 of window k as its word shows it (police.h's window_saw_until, window_look:
 * counted, count c0; or yet to start, c0 = 0 and prev the count of window k - 1 so far, which only
 * grows until k starts, so that a U from it comes no later than the true one): the fixed window
 * keeps the room A - c0 until its end E = (k + 1) W; the sliding window (the window before weighed
 * prev, as published) the room b - 1 until U, the first time of window k at which its estimate has
 * room for b bytes with c0: ceil(prev (W - t) / W) <= A - c0 - b (an integer) <=> prev (W - t) <=
 * (A - c0 - b) W, so U = E - floor((A - c0 - b) W / prev), E where A - c0 < b (never in this
 * window), nothing kept where that quotient is W or more, prev 0 included (room from the window's
 * start: the drop was no count's, a compare-and-swap lost, or the window before not yet
 * published). A packet of b' (bigger than the room) on a reading t < U, readings in order: t is of
 * window k (t >= t0, U <= E), the word counts window k (a reading of k + 1 made before t would
 * come before it) with c >= c0 (a window's count only grows), so the fixed window has c + b' > c0
 * + A - c0 = A, and the sliding window's estimate ceil(prev (W - t) / W) + c + b' > (A - c0 - b) +
 * c0 + b = A: dropped. A reading behind another CPU's of window k + 1 counts in that newer window
 * (police.h's window_current), which may have room: such a packet may be dropped where the word
 * would pass it, never passed where it drops it (as the buckets' above). Largest values: (A - c0 -
 * b) W < 2^31 x 2^32 = 2^63, the quotient below W where kept; E < 2^62 for a clock below 2^62 ns;
 * U - t <= W <= 2^32, kept POLICE_UNTIL_AHEAD past t at most. Kept and tested as a bucket's U
 * (police_keep_until, police_until_short); a window's credit carved afresh in a new window clears the room
 * (police_credit_window), and a U never outlives its window. */

/* A U further ahead of the reading than this (ns) is none (above): 67 ms. */
#define POLICE_UNTIL_AHEAD (1ULL << 26)
/* The bit a U is kept with, so that it is no jiffies stamp and jiffies are no U (above). */
#define POLICE_UNTIL_TAG (1ULL << 62)

/* The stamp a bucket's line keeps for its U `until` (0: not known, none) at the reading `now`: U,
 * POLICE_UNTIL_AHEAD past the reading at most, with POLICE_UNTIL_TAG. */
static __always_inline __u64 police_until(__u64 now, __u64 until)
{
	__u64 kept = until > now && until - now > POLICE_UNTIL_AHEAD ? now + POLICE_UNTIL_AHEAD : until;

	return until ? kept | POLICE_UNTIL_TAG : 0;
}

/* Whether a bucket's U kept as `stamp` (police_until) holds at the reading `now`: after it, by
 * POLICE_UNTIL_AHEAD at most; 0 <= stamp - tag - now - 1 < POLICE_UNTIL_AHEAD, unsigned (a word
 * without the tag wraps: 0, jiffies and a pending word never hold). */
static __always_inline bool police_until_holds(__u64 stamp, __u64 now)
{
	return stamp - POLICE_UNTIL_TAG - now - 1 < POLICE_UNTIL_AHEAD;
}

/* Whether a packet of `bytes` at the reading `now` is one its policer drops by CPU line `s`: bigger
 * than the room kept (~ in short_credit) while the U kept with it holds. */
static __always_inline bool police_until_short(const struct dpp_policer_stats *s, __u64 bytes, __u64 now)
{
	return bytes > ~s->short_credit && police_until_holds(s->stamp, now);
}

/* Keeps in a CPU's line `s`, after its policer dropped a packet on the reading `now`, the `room`
 * no bigger packet has before `until` (0: not known, nothing kept). */
static __always_inline void police_keep_until(struct dpp_policer_stats *s, __u64 room, __u64 now, __u64 until)
{
	if (!until)
		return;
	s->short_credit = ~room;
	s->stamp = police_until(now, until);
}

#endif /* DPP_NF_QOS_STAMP_H */
