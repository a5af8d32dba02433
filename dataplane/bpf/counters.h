/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Counting: add one packet and its bytes to a slot of a per-CPU counter map (struct dpp_counter). */
#ifndef DPP_COUNTERS_H
#define DPP_COUNTERS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/dpp_structs.h"

/* Per-CPU slots need no atomics; an index past the map's end is simply not counted. */
static __always_inline void count(void *map, __u32 index, __u64 bytes)
{
	struct dpp_counter *ctr = bpf_map_lookup_elem(map, &index);

	if (ctr) {
		ctr->packets++;
		ctr->bytes += bytes;
	}
}

#endif /* DPP_COUNTERS_H */
