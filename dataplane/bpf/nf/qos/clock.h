/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The COARSE policers' clock read with a load (struct dpp_clock, struct dpp_clock_word; police.h's
 * police_clock). The coarse clock's helper, bpf_ktime_get_coarse_ns, is a call: 14-16 ns on this
 * machine's kernel (its calls return through the "Safe RET" thunk), most of what a bucket's drop
 * costs at realistic rates (bench/README.md, "A drop kept in ns"). So a BPF timer (CLOCK_MONOTONIC,
 * in dpp_clock's value, re-armed by its own callback every P = DPP_CLOCK_PERIOD_NS) stores
 * bpf_ktime_get_ns() in clock_word.ns, then the jiffies it read just before in .jiffies; a COARSE
 * policer's reading is clock_word.ns while the kernel's jiffies are still clock_word.jiffies, else
 * bpf_ktime_get_coarse_ns() as before.
 *   Why that is a coarse clock in police.h's sense ("The clock": never ahead of the time, behind it
 * by at most L = 2 ticks, the rate over time exact). Let J(j) be the time of the tick of jiffies j
 * (the kernel sets the jiffies to the last tick at or before the time it read:
 * tick_do_update_jiffies64; stamp.h's head). The run that stored ns = t with jiffies = j read j
 * first, so J(j) <= t, and t is a reading of the clock made before the packet's: never ahead of it.
 * A packet that finds the kernel's jiffies still j reads before the update of the next tick, at
 * J(j) + TICK + x (x: how late that update is): t is behind its time by less than TICK + x, the
 * coarse clock's own bound (it is the time of j's update), which L covers for an update up to a
 * tick late. A timer that runs late, stops or never ran (never started; its map's last user gone; 0
 * in both words: the jiffies are never 0, they start at INITIAL_JIFFIES) leaves jiffies the kernel
 * has moved past: the packet calls the helper, so the lag is bounded whatever the timer does.
 * Nothing drifts: both are CLOCK_MONOTONIC. Its steps are P, finer than a tick; for the first P or
 * so after each tick (P / TICK of the readings: 6% at HZ=250, 25% at 1000) the word is the tick
 * before's and the helper is called.
 *   What a word behind the time does to each algorithm is what the coarse clock's lag does
 * (police.h's head, L = 2 ticks): the token bucket and GCRA refill later, never more (any stretch
 * of T ns passes at most R (T + L) / 8e9 + B, the coarse bound the control plane chooses the clock
 * by); the fixed and sliding windows start up to L late (windows of W +- L, coarse only for W >= 32
 * ticks; a reading of the window before counts in the newer one). A word is never behind by more,
 * being refused once the jiffies move on; it can never be ahead.
 *   Order. Every CPU reads the one pair. The callback stores ns, then jiffies; a reader loads the
 * kernel's jiffies, then the word's, then its ns: volatile accesses, kept in that order by the
 * compiler and the JIT, and by x86-64 (stores in order, loads in order), the only architecture the
 * data path is built for (dataplane/Makefile refuses others): a reader that sees a run's jiffies
 * sees its ns or a later run's (a later reading, at or after J(j) too). A weakly ordered CPU would
 * need the stores released and the loads acquired (BPF's store-release and load-acquire, 6.15 on).
 * The word only grows, and the helper's reading is taken no lower than the word: the helper's grid
 * may lag the jiffies' by up to a tick (measured: a helper read after a tick up to 414 us behind
 * the word before it, 280 at the median), and the clock would go back. What is left is a word read
 * after a helper's reading: it may be behind it by the microseconds between an update's jiffies
 * store and its coarse clock store (a run between the two reads the new jiffies and a clock a
 * little behind the coarse clock the update then sets: stamp.h's head's e). Every algorithm takes
 * a reading behind another as one that refills nothing, finds less room or counts in the newer
 * window (police.h): never passing more.
 *   The jiffies stamps (stamp.h's head) rest on two relations: J(j0) < c0 + TICK for the jiffies j0
 * read before a reading c0 (a word's: J(j0) <= c0, better), and c < J(j) + TICK + e for any reading
 * c at jiffies j, which for a word's is c < J(j) + TICK + x: a stamp's packet then reads before its
 * window's end E or its bucket's U (stamp.h's chain: c < E - 2 TICK + x) while the jiffies' update
 * is less than two ticks late. Later, the helper's clock is held back with the jiffies, and its
 * exception is only a reading made between the late update's two stores; the word's is not held
 * back: a timer that runs while the update is two ticks late or more stores the time with the old
 * jiffies, so for as long as the update is late (the kernel lets it stall up to 5 ticks before
 * another CPU's tick makes it: tick-sched.c's MAX_STALLED_JIFFIES) a credit may outlive its
 * window, or a bucket's stamp its U, by x - 2 TICK (the stamp then drops what the bucket might
 * pass: never more passes).
 *   Who starts it: libdpp, at each load, reopen and upgrade, runs dpp_clock_start once through
 * BPF_PROG_TEST_RUN (src/clock.c): the timer initialised (-EBUSY when it runs already: a pinned
 * instance's dpp_clock keeps its timer while the map has a pin or an fd; it is cancelled with the
 * map's last), its callback made the calling program's own (each load has its own clock_word, its
 * section .data.clock: an upgrade's new programs read the new load's, which only the new callback
 * writes; the old load's word then ages out by its jiffies), started now, on the CPU that ran it:
 * some 3,300 runs a second there, 1.4 us each (bench/README.md, "The coarse clock read with a
 * load"). A reopen's run asks to keep a running timer (DPP_CLOCK_START_KEEP in its frame): its
 * programs may be a load an upgrade replaced while the reopen collected them, whose callback would
 * take the timer back to a word the running programs no longer read (they would call the helper
 * from then on); a timer that does not run (cancelled, or never started) it starts. Tests give the
 * time in their frames (xdp_police's police_test_hdr.now_ns): no clock is read, word or helper;
 * the given time wins. */
#ifndef DPP_NF_QOS_CLOCK_H
#define DPP_NF_QOS_CLOCK_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/qos.h"

#ifndef CLOCK_MONOTONIC
#define CLOCK_MONOTONIC 1
#endif
/* bpf_timer_init's error for a timer initialised already (errno's EBUSY). */
#define CLOCK_EBUSY 16

/* slot 0 -> the timer that keeps clock_word.ns (its only slot) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_clock);
} dpp_clock SEC(".maps");

/* CLOCK_MONOTONIC as the timer last read it, and the jiffies read just before (0: never). */
struct dpp_clock_word clock_word SEC(".data.clock");

/* The timer's run: the jiffies, then the clock, stored in the other order (the file's head). */
static int clock_timer_run(void *map, __u32 *key, struct dpp_clock *c)
{
	__u64 jiffies = bpf_jiffies64();

	(void)map;
	(void)key;
	*(volatile __u64 *)&clock_word.ns = bpf_ktime_get_ns();
	*(volatile __u64 *)&clock_word.jiffies = jiffies;
	bpf_timer_start(&c->timer, DPP_CLOCK_PERIOD_NS, 0);
	return 0;
}

/* The coarse clock: clock_word.ns while the kernel's jiffies are the ones read before it, else the
 * helper's, but never behind the word: the helper's grid may lag the jiffies' by up to a tick, and
 * the clock never goes back (the file's head). */
static __always_inline __u64 clock_coarse(void)
{
	__u64 jiffies = bpf_jiffies64();
	__u64 coarse, word;

	if (*(volatile __u64 *)&clock_word.jiffies == jiffies)
		return *(volatile __u64 *)&clock_word.ns;
	coarse = bpf_ktime_get_coarse_ns();
	word = *(volatile __u64 *)&clock_word.ns;
	return coarse > word ? coarse : word;
}

/* Whether dpp_clock_start's frame asks to leave a running timer as it is (DPP_CLOCK_START_KEEP). */
static __always_inline bool clock_start_keeps(const struct xdp_md *ctx)
{
	const __u8 *data = (const __u8 *)(long)ctx->data;

	return data + 1 <= (const __u8 *)(long)ctx->data_end && *data == DPP_CLOCK_START_KEEP;
}

/* Starts dpp_clock's timer, or makes this program's the callback of the one running unless the
 * frame asks to keep it (libdpp runs it once a load, reopen and upgrade: src/clock.c). XDP_PASS:
 * running; DPP_CLOCK_START_RESTARTED: asked to keep, none ran, started; XDP_ABORTED: not running
 * (the policers call the helper). */
SEC("xdp")
int dpp_clock_start(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct dpp_clock *c = bpf_map_lookup_elem(&dpp_clock, &zero);
	bool keep = clock_start_keeps(ctx);
	long err;

	if (!c)
		return XDP_ABORTED;
	err = bpf_timer_init(&c->timer, &dpp_clock, CLOCK_MONOTONIC);
	if (err == -CLOCK_EBUSY && keep)
		return XDP_PASS;
	if (err && err != -CLOCK_EBUSY)
		return XDP_ABORTED;
	if (bpf_timer_set_callback(&c->timer, clock_timer_run) || bpf_timer_start(&c->timer, 0, 0))
		return XDP_ABORTED;
	return keep ? DPP_CLOCK_START_RESTARTED : XDP_PASS;
}

#endif /* DPP_NF_QOS_CLOCK_H */
