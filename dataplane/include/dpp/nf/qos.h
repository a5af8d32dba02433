/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of the QoS function's policers (bpf/nf/qos/): a policer's configuration and state, one
 * slot of dpp_policers by policer id, its counters (dpp_policer_stats), the algorithms and the
 * gate.
 * Mirrored in netapp/qos/abi.py, checked against BTF like the core's. */
#ifndef DPP_NF_QOS_H
#define DPP_NF_QOS_H

#include <linux/types.h>
#include <linux/bpf.h>

/* Slots of dpp_policers and dpp_policer_stats (slot 0: no policer): a capacity, sized at load. */
#ifndef DPP_MAX_POLICERS
#define DPP_MAX_POLICERS 65536
#endif

/* The configurations for which nf/qos/police.h's arithmetic is exact and never wraps (the bounds
 * of every intermediate value are written there); netapp/qos/abi.py refuses the others. Rates in
 * bit/s, bursts and window allowances in bytes, windows as log2 of nanoseconds. */
#define DPP_POLICE_RATE_MIN 8000
#define DPP_POLICE_RATE_MAX 400000000000
#define DPP_POLICE_BURST_MAX 1073741824
#define DPP_POLICE_WINDOW_SHIFT_MIN 10
#define DPP_POLICE_WINDOW_SHIFT_MAX 32
/* GCRA's units: the arrival time in 2^-DPP_POLICE_GCRA_TAT_SHIFT ns, a byte's time (interval) in
 * 2^-(TAT_SHIFT + INTERVAL_SHIFT) ns. */
#define DPP_POLICE_GCRA_TAT_SHIFT 6
#define DPP_POLICE_GCRA_INTERVAL_SHIFT 20
/* The most a window lets through (rate x window / 8), so that a window's count keeps 32 bits. */
#define DPP_POLICE_WINDOW_BYTES_MAX 1073741824
/* The policers a packet goes through from the one it names: itself and its parent (struct
 * dpp_policer.parent); a parent's own parent is not followed (the control plane refuses it). */
#define DPP_POLICE_DEPTH 2

/* enum dpp_police_algo: how a policer enforces its rate (struct dpp_policer.algo). */
enum dpp_police_algo {
	DPP_POLICE_ALGO_NONE = 0,	    /* an empty slot: packets pass, uncounted */
	DPP_POLICE_ALGO_TOKEN_BUCKET = 1,   /* burst bytes at most, refilled at rate (spin lock) */
	DPP_POLICE_ALGO_FIXED_WINDOW = 2,   /* rate x window per window of the clock (atomic) */
	DPP_POLICE_ALGO_SLIDING_WINDOW = 3, /* the last window's count, weighted, plus this one's */
	DPP_POLICE_ALGO_GCRA = 4,	    /* the token bucket as one arrival time (atomic) */
};

/* enum dpp_police_clock: the clock a policer decides on (struct dpp_policer.clock): the precise one
 * or the tick-stepped one (cheaper; nf/qos/police.h says what it does to each algorithm and when the
 * control plane chooses it). */
enum dpp_police_clock {
	DPP_POLICE_CLOCK_PRECISE = 0, /* bpf_ktime_get_ns() */
	DPP_POLICE_CLOCK_COARSE = 1,  /* as of its last tick, or its timer's (nf/qos/clock.h) */
};

/* enum dpp_police_gate: the QER's gate status (struct dpp_policer.gate). */
enum dpp_police_gate {
	DPP_POLICE_GATE_OPEN = 0,   /* packets are policed */
	DPP_POLICE_GATE_CLOSED = 1, /* every packet is dropped (counted as dropped) */
};

/* Value of dpp_policers, by policer id: the configuration (written by the control plane) and the
 * state the data path keeps (zero when written: a rewritten policer starts afresh). One cache
 * line: a policed packet touches this line and its counters' line (and its parent's two). A parent
 * chains policers: a flow's MBR, then its session's AMBR, which all the session's flows share. */
struct dpp_policer {
	__u64 rate;	   /* bit/s, DPP_POLICE_RATE_MIN..MAX */
	__u32 burst;	   /* TOKEN_BUCKET: the bucket's size, bytes (1..DPP_POLICE_BURST_MAX) */
	__u8 algo;	   /* enum dpp_police_algo */
	__u8 gate;	   /* enum dpp_police_gate */
	__u8 window_shift; /* windows: a window lasts 1 << window_shift ns, on the clock's grid */
	__u8 clock;	   /* enum dpp_police_clock */
	struct bpf_spin_lock lock; /* TOKEN_BUCKET: guards credit and last_ns */
	__u32 parent; /* the policer a packet this one passes goes through next; 0: none */
	__u64 credit;  /* TOKEN_BUCKET: the bucket's content in nanobits (1 byte = 8e9 nanobits) */
	__u64 last_ns; /* TOKEN_BUCKET: the clock when credit was last brought up to date */
	/* windows: the current window's number (high 32 bits) and bytes (low 32); GCRA: the
	 * theoretical arrival time, 1/64 ns (the word the lock-free algorithms compare-and-swap) */
	__u64 window;
	/* SLIDING_WINDOW: the window before's number and bytes, the same packing; TOKEN_BUCKET and
	 * GCRA on the COARSE clock: the kernel's tick in ns, as the control plane read it, which their
	 * CPUs' drops are stamped in jiffies with (0: none; nf/qos/stamp.h, "A bucket seen short by
	 * jiffies") */
	__u64 previous;
	/* GCRA: a byte's time at rate, 2^-26 ns, rounded up (control plane's); FIXED_WINDOW and
	 * SLIDING_WINDOW on the COARSE clock: the kernel's tick in ns, as the control plane read it
	 * (clock_getres of CLOCK_MONOTONIC_COARSE), which their CPUs' credits are stamped in jiffies
	 * with (0: none; nf/qos/police.h, "A window's credit without the clock") */
	__u64 interval;
};

/* Value of dpp_clock's one slot (nf/qos/clock.h): the timer that keeps the COARSE policers' clock
 * in a word they read with a load instead of a helper call. Its callback re-arms it every
 * DPP_CLOCK_PERIOD_NS; libdpp starts it at each load (dpp_clock_start). Nothing else is in the
 * value: a write of it from user space would cancel the timer. */
struct dpp_clock {
	struct bpf_timer timer;
};

/* The COARSE policers' clock (nf/qos/clock.h): CLOCK_MONOTONIC as dpp_clock's timer last read it,
 * and the jiffies it read just before (0: never); a global of its own (section .data.clock: an
 * array of one value, each load's own), written by the timer's callback alone. */
struct dpp_clock_word {
	__u64 ns;
	__u64 jiffies;
};

/* The clock timer's period (nf/qos/clock.h: the share of readings that still call the helper is
 * about this over the kernel's tick). */
#define DPP_CLOCK_PERIOD_NS 250000

/* dpp_clock_start's frame's first byte when a running timer is to be left as it is (a reopen's
 * start: its programs may be a load an upgrade has replaced since; nf/qos/clock.h). Any other
 * byte makes the running timer's callback the caller's (a load's and an upgrade's start). */
#define DPP_CLOCK_START_KEEP 1
/* dpp_clock_start's verdict when asked to keep a running timer and none ran: it started one
 * (XDP_TX; else XDP_PASS, the timer runs, or XDP_ABORTED, it does not). */
#define DPP_CLOCK_START_RESTARTED 3

/* Value of dpp_policer_stats, by CPU row and policer id (nf/qos/maps.h): what the policer let
 * through and what it dropped on this CPU, and this CPU's credit: bytes it carved out of the
 * policer's bucket (TOKEN_BUCKET, GCRA) or current window (FIXED_WINDOW, SLIDING_WINDOW), a chunk
 * at a time, and spends without touching the shared state (no lock, no compare-and-swap:
 * nf/qos/police.h, "The CPUs' credit"). The control plane writes the chunk with the counters (0:
 * no credit, every packet decided on the shared state) and a bucket's burst less what the CPUs'
 * chunks may hold, so that the two together never pass more than the burst asked. One cache line: the map's values start on a page (BPF_F_MMAPABLE) and
 * follow each other every DPP_POLICER_STATS_SIZE bytes, so that whatever a packet reads and writes
 * here (the credit, then one pair of counters) is one line for every policer. */
struct dpp_policer_stats {
	__u32 credit; /* bytes this CPU may still pass on its own, at most chunk */
	__u32 chunk;  /* bytes carved at a time, at most DPP_POLICE_CHUNK_MAX; 0: none */
	__u64 passed_packets;
	__u64 passed_bytes;
	__u64 dropped_packets;
	__u64 dropped_bytes;
	/* TOKEN_BUCKET and GCRA: ~ the room below the packet this CPU's drop saw the bucket too short
	 * for (short_credit; 0: none), and (stamp) the time in ns from which the bucket may hold more,
	 * tagged with 2^62 (0: none), so that a bigger packet before it is dropped without the lock or
	 * the shared word (nf/qos/stamp.h, "A bucket seen short in ns"); on the COARSE clock with a
	 * tick, where it can, as the windows' (stamp) the jiffies up to which the bucket cannot hold a
	 * packet of more than the room (nf/qos/stamp.h, "A bucket seen short by jiffies"). FIXED_WINDOW
	 * and SLIDING_WINDOW on the coarse clock with a tick: (stamp) the jiffies up to which the line
	 * is credit_window's without a clock read (0: none; the jiffies | 2^63 while a reading is made:
	 * nf/qos/stamp.h), and (short_credit) ~
	 * the most room that window has while the stamp holds, as this CPU saw it when it dropped a
	 * packet (0: none seen; nf/qos/stamp.h, "A window seen full") */
	__u64 short_credit;
	__u64 stamp;
	/* FIXED_WINDOW and SLIDING_WINDOW: the window the credit was carved in and counted in, the
	 * clock >> window_shift (all 64 bits: it never wraps); the credit is spent only by a packet of
	 * that window (nf/qos/police.h, "The CPUs' credit"). TOKEN_BUCKET and GCRA with a tick: the
	 * jiffies | 2^63 of a decision being made (0: none; nf/qos/stamp.h, "A bucket seen short by
	 * jiffies") */
	__u64 credit_window;
};

/* sizeof(struct dpp_policer_stats): a cache line. */
#define DPP_POLICER_STATS_SIZE 64
_Static_assert(sizeof(struct dpp_policer_stats) == DPP_POLICER_STATS_SIZE,
	       "a CPU's share of a policer: one line");

/* The largest chunk a CPU holds (struct dpp_policer_stats.chunk). */
#define DPP_POLICE_CHUNK_MAX 1048576

/* Slots of dpp_rule_policers: rule slots that can be policed (a capacity, sized at load). */
#ifndef DPP_MAX_RULE_POLICE
#define DPP_MAX_RULE_POLICE 65536
#endif

/* Value of dpp_rule_policers, by rule slot (struct dpp_rule.slot): the policers a rule with
 * DPP_RULE_POLICED goes through before its action, its own first, then the one it shares (its
 * slice's MBR, one policer for all the slice's rules); 0: none. A rule names its policers through
 * its slot, so struct dpp_rule keeps its 16 bytes, and a rule without the flag never reads this.
 * The ids are the control plane's: the policer ids are split in two ranges, the UPF's QERs below
 * half the size of dpp_policers, rules and slices from there on (netapp/qos/ids.py), so that
 * neither ever empties or rewrites the other's. */
struct dpp_rule_police {
	__u32 policer; /* the rule's own (an intent's police option) */
	__u32 shared;  /* the one it shares with other rules of its tenant (a slice's MBR) */
};

/* The QoS function's reasons, from DPP_REASON_BASE_QOS (dpp/core/consts.h). */
#define DPP_QOS_REASONS(X)                                                                       \
	X(QOS, QOS_POLICED, qos_policed, 0) /* over its policer's rate, or its gate closed: drop */

#endif /* DPP_NF_QOS_H */
