/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of the QoS function's policers: their configuration and state, and their counters
 * (written and read by netapp/qos/applier.py as generic tables). */
#ifndef DPP_NF_QOS_MAPS_H
#define DPP_NF_QOS_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/qos.h"

/* policer id -> its configuration and state (slot 0 and empty slots: no policer; shared by the
 * CPUs: the token bucket under the value's spin lock, the windows by compare-and-swap) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_POLICERS);
	__type(key, __u32);
	__type(value, struct dpp_policer);
} dpp_policers SEC(".maps");

/* CPU x policer slots + policer id -> the packets and bytes it passed and dropped on that CPU, and
 * that CPU's credit: a row of policer slots per CPU (libdpp sizes it to possible CPUs x the slots of
 * dpp_policers), which only its CPU writes. A plain array is one cold line per policer where a
 * per-CPU array takes two (its pointer table, then the value); mmapable so that its values start
 * on a page, each in a line of its own (struct dpp_policer_stats). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_POLICERS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_policer_stats);
} dpp_policer_stats SEC(".maps");

/* Load-time knob (skeleton rodata): policer slots per CPU row of dpp_policer_stats, the size of
 * dpp_policers. */
const volatile __u32 cfg_policer_slots = DPP_MAX_POLICERS;

/* rule slot -> the policers of the rule in that slot, read only when it has DPP_RULE_POLICED */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_RULE_POLICE);
	__type(key, __u32);
	__type(value, struct dpp_rule_police);
} dpp_rule_policers SEC(".maps");

#endif /* DPP_NF_QOS_MAPS_H */
