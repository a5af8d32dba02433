// SPDX-License-Identifier: GPL-2.0-only
/* Counts what CPUMAP queues refuse: attached to the xdp_cpumap_enqueue raw tracepoint, it adds up
 * per target CPU the frames enqueued and those dropped because the CPU's queue was full. The
 * throughput benchmark reads it to say where a lost frame was lost. Machine-wide: every CPUMAP. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef CPUMAP_MAX_CPUS
#define CPUMAP_MAX_CPUS 64
#endif

struct cpumap_counts {
	__u64 processed;
	__u64 drops;
};

/* target CPU -> frames enqueued for it and frames dropped at its full queue */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPUMAP_MAX_CPUS);
	__type(key, __u32);
	__type(value, struct cpumap_counts);
} cpumap_counts SEC(".maps");

/* xdp_cpumap_enqueue(int map_id, unsigned int processed, unsigned int drops, int to_cpu) */
SEC("raw_tp/xdp_cpumap_enqueue")
int count_cpumap_enqueue(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 cpu = (__u32)ctx->args[3];
	struct cpumap_counts *c = bpf_map_lookup_elem(&cpumap_counts, &cpu);

	if (c) {
		c->processed += (__u32)ctx->args[1];
		c->drops += (__u32)ctx->args[2];
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
