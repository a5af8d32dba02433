/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of the GTP-U dispatcher (nf/qos/rss.h): dispatcher interfaces, worker CPUs, their
 * CPUMAP queues (whose program runs the pipeline on the worker) and what each worker was given. */
#ifndef DPP_NF_QOS_RSS_MAPS_H
#define DPP_NF_QOS_RSS_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "dpp/nf/rss.h"
#include "dpp/nf/steer.h"

/* ifindex % DPP_MAX_RSS_IFACES -> the dispatcher interface there and its number of workers */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_RSS_IFACES);
	__type(key, __u32);
	__type(value, struct dpp_rss_iface);
} dpp_rss_ifaces SEC(".maps");

/* worker slot -> worker CPU id: the hash's slot of a tunnel names its CPU */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_RSS_WORKERS);
	__type(key, __u32);
	__type(value, struct dpp_rss_worker);
} dpp_rss_workers SEC(".maps");

/* CPU id -> CPUMAP queue whose program is dpp_rss_worker: the pipeline, on that CPU. Apart from
 * dpp_cpu_map (no program: steered packets go to that CPU's stack) */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} dpp_rss_cpu_map SEC(".maps");

/* CPU id -> packets and bytes dispatched to that worker (by the hash or a steering rule) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct dpp_counter);
} dpp_rss_stats SEC(".maps");

#endif /* DPP_NF_QOS_RSS_MAPS_H */
