/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The per-CPU rate meter: whether a CPU has taken what its capacity allows in this window. */
#ifndef DPP_NF_STEER_METER_H
#define DPP_NF_STEER_METER_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "nf/steer/maps.h"

/* Packets a receiving CPU takes from a target's window budget at a time. */
static __always_inline __u64 meter_share_size(__u64 budget)
{
	__u64 share = budget / DPP_METER_SHARE_DIVISOR;

	if (share > DPP_METER_SHARE_MAX)
		return DPP_METER_SHARE_MAX;
	return share ? share : 1;
}

#define METER_TAKEN_MASK ((1ULL << DPP_METER_TAKEN_BITS) - 1)
#define METER_WINDOW_MASK ((1ULL << DPP_METER_WINDOW_BITS) - 1)
#define METER_CAS_TRIES 8

/* This CPU's new share: what is left of the budget, up to the share size. */
static __always_inline bool meter_grant(struct dpp_meter_share *mine, __u64 budget, __u64 taken,
					__u64 want)
{
	/* This packet is one of the share's packets. */
	mine->tokens = (budget - taken < want ? budget - taken : want) - 1;
	mine->exhausted = 0;
	return false;
}

static __always_inline bool meter_refused(struct dpp_meter_share *mine, bool exhausted)
{
	mine->tokens = 0;
	mine->exhausted = exhausted;
	return true;
}

/* Slow path of the meter: this CPU's share is used up or from an old window. Takes a new share of
 * the target's budget by compare-and-swap on the target's word, the only line receivers share.
 * Windows are fixed slots of time from the meter's origin, so every CPU agrees on which one a packet
 * is in. */
static __always_inline bool meter_take_share(struct dpp_cpu_meter *meter, struct dpp_meter_share *mine,
					     __u64 budget, __u64 now, const struct dpp_config *cfg)
{
	__u64 origin = meter->origin_ns, want = meter_share_size(budget), window, old, taken, tag;
	int i;

	if (budget > METER_TAKEN_MASK)
		budget = METER_TAKEN_MASK;
	window = now > origin ? (now - origin) / cfg->meter_window_ns : 0;
	tag = (window & METER_WINDOW_MASK) << DPP_METER_TAKEN_BITS;
	mine->window_end_ns = origin + (window + 1) * cfg->meter_window_ns;
	for (i = 0; i < METER_CAS_TRIES; i++) {
		old = *(volatile __u64 *)&meter->window_taken;
		taken = (old & ~METER_TAKEN_MASK) == tag ? old & METER_TAKEN_MASK : 0;
		if (taken >= budget)
			return meter_refused(mine, true);
		if (__sync_val_compare_and_swap(&meter->window_taken, old, tag | (taken + want)) == old)
			return meter_grant(mine, budget, taken, want);
	}
	/* Lost every race: overflow this one packet rather than admit it past the budget. */
	return meter_refused(mine, false);
}

/* Fixed-window meter of the packets given to a CPU, against its capacity; plus the control
 * plane's overload flag. The fast path touches only this receiving CPU's share, and not even the
 * clock (a clock read costs more than the rest of the meter in a VM): a share is spent wherever its
 * window ends, so a window may also take up to a share per receiving CPU from the one before. */
static __always_inline bool cpu_overloaded(__u32 cpu_id, const struct dpp_cpu *cpu,
					   const struct dpp_config *cfg)
{
	struct dpp_meter_share *mine;
	struct dpp_cpu_meter *meter;
	__u64 now;

	if (cpu->overloaded)
		return true;
	if (!cpu->window_budget || !cfg->meter_window_ns)
		return false;
	mine = bpf_map_lookup_elem(&dpp_meter_shares, &cpu_id);
	meter = bpf_map_lookup_elem(&dpp_cpu_meters, &cpu_id);
	if (!mine || !meter)
		return false;
	if (mine->tokens) {
		mine->tokens--;
		return false;
	}
	now = bpf_ktime_get_ns();
	if (now < mine->window_end_ns && mine->exhausted)
		return true;
	return meter_take_share(meter, mine, cpu->window_budget, now, cfg);
}

#endif /* DPP_NF_STEER_METER_H */
