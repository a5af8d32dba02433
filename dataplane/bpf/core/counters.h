/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Counting: add one packet and its bytes to a slot of a counter map (struct dpp_counter) that only
 * this CPU writes: a per-CPU array, or this CPU's row of dpp_rule_stats. */
#ifndef DPP_CORE_COUNTERS_H
#define DPP_CORE_COUNTERS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"

/* Slots of one CPU need no atomics; an index past the map's end is simply not counted. */
static __always_inline void count(void *map, __u32 index, __u64 bytes)
{
	struct dpp_counter *ctr = bpf_map_lookup_elem(map, &index);

	if (ctr) {
		ctr->packets++;
		ctr->bytes += bytes;
	}
}

/* Load-time knob (skeleton rodata): rule slots per CPU row of dpp_rule_stats. */
const volatile __u32 cfg_rule_slots = DPP_MAX_RULES;

/* Index of this CPU's counter of a rule slot in dpp_rule_stats. A slot past the row would land in
 * the next CPU's row, on another rule's counter: it gets an index past the map, not counted. */
static __always_inline __u32 rule_stat_index(__u32 slot)
{
	if (slot >= cfg_rule_slots)
		return DPP_NONE;
	return bpf_get_smp_processor_id() * cfg_rule_slots + slot;
}

#endif /* DPP_CORE_COUNTERS_H */
