/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of CPU steering: the CPU set, its meters, its CPUMAP and its counters. */
#ifndef DPP_NF_STEER_MAPS_H
#define DPP_NF_STEER_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "dpp/nf/steer.h"

/* CPU id -> membership of the CPU set, capacity, overload flag */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct dpp_cpu);
} dpp_cpus SEC(".maps");

/* CPU id -> fixed-window packet meter of the traffic given to that CPU */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct dpp_cpu_meter);
} dpp_cpu_meters SEC(".maps");

/* CPU id -> this receiving CPU's unused share of that CPU's meter window (per CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct dpp_meter_share);
} dpp_meter_shares SEC(".maps");

/* CPU id -> CPUMAP queue: the target of STEER */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} dpp_cpu_map SEC(".maps");

/* CPU id -> packets and bytes STEER handed to that CPU's CPUMAP queue */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_cpu_stats SEC(".maps");

#endif /* DPP_NF_STEER_MAPS_H */
