/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps the pipeline core shares: rules, shapes and their filters, configuration, flow cache,
 * counters, trace, and the tail-call slots with what the entry hands over to them. Each network function's own maps are in nf/<function>/maps.h. Names are the
 * ABI libdpp opens and pins them by; rule-sized maps are resized by libdpp before load. */
#ifndef DPP_CORE_MAPS_H
#define DPP_CORE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "dpp/reasons.h"

/* masked flow key (with .shape) -> rule */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_RULES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct dpp_flow_key);
	__type(value, struct dpp_rule);
} dpp_rules SEC(".maps");

/* slot 0 or 1 -> shape set; dpp_config.shape_set names the active one */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct dpp_shape_set);
} dpp_shapes SEC(".maps");

/* filter * DPP_FILTER_WORDS + word -> 64 bits of a shape's filter (dpp/core/filter.h); libdpp maps
 * it into its memory and sets a key's bits before the rule is added, clears them after it is gone */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_FILTERS * DPP_FILTER_WORDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u64);
} dpp_filters SEC(".maps");

/* tunnel endpoint address a rule names -> its id (__u8 in a __u32), which a GTP-U packet's key
 * carries (core/ends.h); written by the control plane, looked up only while dpp_config.tunnel_ends */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_TUNNEL_ENDS);
	__type(key, struct dpp_tunnel_end);
	__type(value, __u32);
} dpp_tunnel_ends SEC(".maps");

/* 0 -> runtime configuration */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_config);
} dpp_config SEC(".maps");

/* CPU * cfg_flow_slots + hash of an unmasked flow key -> that flow's last classification on that
 * CPU (a row of slots per CPU, direct-mapped: the key is stored in the value and compared; libdpp
 * sizes it to possible CPUs * cfg_flow_slots, a power of two per row). A plain array: a probe of a
 * cold slot costs its entry's lines, not a per-CPU array's pointer table first. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct dpp_flow_entry);
} dpp_flows SEC(".maps");

/* 0 -> this CPU's flow cache hit rate, and whether probing pays (per CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_flow_use);
} dpp_flow_use SEC(".maps");

/* CPU * rule slots + rule slot -> packets and bytes that matched the rule on that CPU: a row of
 * slots per CPU (libdpp sizes it to possible CPUs * rule slots). A plain array is one cold line per
 * packet where a per-CPU array takes two (its pointer table, then the value); the rows keep every
 * CPU's counters on lines of their own, so no atomics are needed. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_RULES);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_rule_stats SEC(".maps");

/* enum dpp_verdict -> packets and bytes that got it */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_VERDICT_MAX);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_verdicts SEC(".maps");

/* enum dpp_action -> packets and bytes it was carried out on */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_ACTION_MAX);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_actions SEC(".maps");

/* enum dpp_reason -> packets and bytes that had it */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_REASON_MAX);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_reasons SEC(".maps");

/* 0 -> outcome of the last packet (written only when loaded with trace on) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_trace);
} dpp_trace SEC(".maps");

/* The programs in dpp_progs' slots, defined further on (core/trace.h, nf/frer/stage.h,
 * nf/atsss/stage.h, the entry itself in dpp.bpf.c): libbpf fills the slots when it loads the object, so the entry never meets
 * an empty one. */
int dpp_xdp_trace(struct xdp_md *ctx);
int dpp_frer_stage(struct xdp_md *ctx);
int dpp_xdp(struct xdp_md *ctx);
int dpp_atsss_stage(struct xdp_md *ctx);

/* enum dpp_prog -> the program the entry tail-calls for that step. Each load (dpp_open,
 * dpp_upgrade) makes its own, filled with its own programs: a packet runs one load's programs. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, DPP_PROG_MAX);
	__uint(key_size, sizeof(__u32)); /* a BTF key type would make the kernel refuse the map */
	__array(values, int(struct xdp_md *));
} dpp_progs SEC(".maps") = {
	.values = {
		[DPP_PROG_TRACE] = (void *)&dpp_xdp_trace,
		[DPP_PROG_FRER] = (void *)&dpp_frer_stage,
		[DPP_PROG_ENTRY] = (void *)&dpp_xdp,
		[DPP_PROG_ATSSS] = (void *)&dpp_atsss_stage,
	},
};

/* 0 -> what the entry hands to the program it tail-calls: the packet's outcome so far (per CPU:
 * the entry and its tail call run back to back on one CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_trace);
} dpp_handover SEC(".maps");

/* enum dpp_prog -> packets and bytes the program in that slot of dpp_progs ran on */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_PROG_MAX);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_prog_stats SEC(".maps");

#endif /* DPP_CORE_MAPS_H */
