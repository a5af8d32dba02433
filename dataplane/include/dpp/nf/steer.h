/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of CPU steering (bpf/nf/steer/): the CPU set, its CPUMAP and the per-CPU rate meter. */
#ifndef DPP_NF_STEER_H
#define DPP_NF_STEER_H

#include <linux/types.h>

/* Map size: CPU ids (dpp_cpus, dpp_cpu_map and the meters). */
#ifndef DPP_MAX_CPUS
#define DPP_MAX_CPUS 128
#endif

/* CPU meter shares (struct dpp_meter_share): a receiving CPU takes 1/DPP_METER_SHARE_DIVISOR of a
 * target's window budget at a time, at least 1 and at most DPP_METER_SHARE_MAX packets, and spends
 * it whenever its packets come. A window hands out at most its budget; the packets it admits differ
 * from the budget by at most (share - 1) per receiving CPU, shares spent after the window ended or
 * not spent in it: with 2 receivers, 2/DPP_METER_SHARE_DIVISOR of the budget. */
#define DPP_METER_SHARE_DIVISOR 64
#define DPP_METER_SHARE_MAX 64
/* struct dpp_cpu_meter.window_taken: packets taken (budgets above 2^40 - 1 are cut to it) and the
 * window number they belong to (it wraps after 2^24 windows: 4.6 hours of 1 ms windows). */
#define DPP_METER_TAKEN_BITS 40
#define DPP_METER_WINDOW_BITS 24

/* Value of dpp_cpus, indexed by CPU id: the CPU set the NetApp steers to. */
struct dpp_cpu {
	__u32 enabled;	     /* 1 when the CPU is in the set (and has a CPUMAP entry) */
	__u32 overloaded;    /* set by the control plane; forces overflow handling */
	__u64 capacity_pps;  /* configured capacity, 0 = unmetered */
	__u64 window_budget; /* packets per meter window: capacity_pps * meter_window_ns / 1e9 */
};

/* Value of dpp_cpu_meters, indexed by CPU id: the packets the receiving CPUs took from the CPU's
 * window budget, in shares (struct dpp_meter_share). One word, changed by compare-and-swap only, so
 * that a new window's count and its number change together and no take is lost to a reset. */
struct dpp_cpu_meter {
	__u64 origin_ns;    /* windows count from here (CLOCK_MONOTONIC): set with the CPU's capacity */
	__u64 window_taken; /* window number (low DPP_METER_WINDOW_BITS) << DPP_METER_TAKEN_BITS | taken */
};

/* Value of dpp_meter_shares (per receiving CPU, indexed by the steering target's CPU id): the part
 * of the target's window budget this receiving CPU took and has not used yet. Receivers count down
 * their own share, so they meet on the target's word once per share, not once per packet. */
struct dpp_meter_share {
	__u64 window_end_ns; /* end of the target's window the share was taken in */
	__u32 tokens;	     /* packets of the share this CPU may still steer there */
	__u32 exhausted;     /* 1: the budget was gone when this CPU asked; overloaded until the window ends */
};

/* Steering's reasons, from DPP_REASON_BASE_STEER (dpp/core/consts.h). */
#define DPP_STEER_REASONS(X)                                                                     \
	X(STEER, CPU_UNAVAILABLE, cpu_unavailable, 0) /* steer target not in the CPU set */      \
	X(STEER, CPU_OVERLOADED, cpu_overloaded, 1)   /* target or local CPU overloaded */

#endif /* DPP_NF_STEER_H */
