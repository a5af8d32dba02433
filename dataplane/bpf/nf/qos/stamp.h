/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A window's credit without the clock (struct dpp_policer_stats.stamp), for nf/qos/police.h's
 * windows on their CPUs' credit (its head, "The CPUs' credit"). Reading the clock is most
 * of what is left of a window's pass on its credit (bpf_ktime_get_coarse_ns some 25 ns a call on a
 * VM, bpf_jiffies64 0-2: inlined by the verifier; bench/README.md, "A window's credit by
 * jiffies"). So a window on the COARSE clock whose control plane wrote the kernel's tick (struct
 * dpp_policer.interval, TICK: clock_getres of CLOCK_MONOTONIC_COARSE) stamps its CPU's line, when
 * it reads the clock, with a jiffies deadline D at most its window's end E = (k + 1) W:
 *   D = j0 + floor((E - c0) / TICK) - 4      (0, none, when that is not past j0)
 * c0 the reading, j0 the jiffies read just before it; a packet whose jiffies are at most D then
 * spends the credit (or finds it short) without reading the clock, as one of window k. Exact: the
 * coarse clock and jiffies are moved by the same tick (jiffies first, then the clock), each never
 * ahead of the real time t and, as the coarse clock's bounds in police.h's head already allow, behind it by
 * less than L = 2 ticks; jiffies j stand for the time J(j) = J(j0) + (j - j0) TICK of their tick.
 * A packet at jiffies j <= D, had it read the clock at its real time t, would have read
 *   c <= t < J(j) + L <= J(j0) + (D - j0) TICK + L <= t0 + (E - c0) - 4 TICK + L
 *     < c0 + (E - c0) - 4 TICK + 2 L = E
 * (t0 the real time of the reading c0 > t0 - L; J(j0) <= t0 since j0 was read first): a time of
 * window k, and never one before it (the clock never goes back). So whatever a credit passes, it
 * passes in the window it was counted in: the allowance bound (at most A a window, 2 A in any
 * W-long stretch) is the clock's. A stamp that expires early costs a clock read, not bytes: the packet
 * then reads the clock, and a credit of its window is kept and stamped afresh (the last four ticks
 * or so of a window read the clock, 1/8 of a window of 32 ticks, the shortest the control plane
 * puts on the coarse clock); what is lost is what was lost before, the carve a window ends with
 * (a window passes A - N C - a packet at least: police.h's head). Only the COARSE clock: a PRECISE policer relies on no tick (jiffies
 * held off with a VM's timekeeping vCPU would let its credit outlive its window), and its windows
 * are short beside the tick (under 32) where four ticks leave little. Only a reading of its own:
 * the chain's (a reading taken before, by the policer before) has no jiffies read just before it
 * and stamps none (D 0). TICK is read from the kernel the data path runs on by the control plane
 * when it writes the policer (a container shares the kernel; HZ is that kernel's build constant,
 * and a reboot reloads the data plane, whose policers are written afresh): a TICK written larger
 * than the kernel's expires stamps earlier, never later; 0 stamps none. A stamp is trusted only
 * within POLICE_STAMP_AHEAD ticks ahead: the field is the token bucket's time of short_credit too,
 * and what a bucket's packet deciding across a rewrite of the slot may leave there is a time in ns,
 * taken for a stamp only if it lies within 2^16 of the jiffies (some 4.3 s after boot, when the two
 * counts meet). The other way, a stamp left in a bucket's line is a time of some 4.3e9 ns: older
 * than POLICE_REFILL_EXACT_NS past the first seconds after boot, not used (bucket_seen_short). */
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
/* The ticks a stamp keeps off its window's end: two lags of L = 2 ticks (this file's head). */
#define POLICE_STAMP_MARGIN 4

/* Whether window policer p's CPU credit may be stamped with jiffies: on the coarse clock, with the
 * kernel's tick written (struct dpp_policer.interval). */
static __always_inline bool police_ticked(const struct dpp_policer *p)
{
	return p->clock == DPP_POLICE_CLOCK_COARSE && p->interval;
}

/* The jiffies deadline of a credit of the window of reading `now` (clock ns, ticked policer p),
 * `jiffies` read just before it: at most the window's end less POLICE_STAMP_MARGIN ticks, in whole
 * ticks; 0 (none) when that is not past `jiffies`, or `jiffies` is unknown (0). */
static __always_inline __u64 police_stamp(const struct dpp_policer *p, __u64 now, __u64 jiffies)
{
	__u64 width = 1ULL << p->window_shift;
	__u64 ticks = (width - (now & (width - 1))) / p->interval;

	return jiffies && ticks > POLICE_STAMP_MARGIN ? jiffies + ticks - POLICE_STAMP_MARGIN : 0;
}

#endif /* DPP_NF_QOS_STAMP_H */
