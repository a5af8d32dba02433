/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of FRER: the sequence recovery functions by stream handle (written and read by
 * netapp/frer as a generic table, read with BPF_F_LOCK). */
#ifndef DPP_NF_FRER_MAPS_H
#define DPP_NF_FRER_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/frer.h"

/* stream handle -> its recovery function: parameters, state and counters under one lock (shared
 * by the CPUs: frames of one stream arrive on any of them, one per path at least) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_FRER_STREAMS);
	__type(key, __u32);
	__type(value, struct dpp_frer_recovery);
} dpp_frer_recovery SEC(".maps");

#endif /* DPP_NF_FRER_MAPS_H */
