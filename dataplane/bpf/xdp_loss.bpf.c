// SPDX-License-Identifier: GPL-2.0-only
/* Random loss on a path of a testbed, where the kernel has no netem: every frame is dropped with
 * the probability loss_config[0] / 2^32 (0: none is), each decision counted, so a test sees the loss
 * it asked for was really made. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

enum loss_counter {
	LOSS_PASSED = 0,
	LOSS_DROPPED = 1,
};

/* 0 -> the drop threshold: a frame is dropped when a random 32-bit number falls below it */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} loss_config SEC(".maps");

/* enum loss_counter -> frames so decided (one shared slot, added to atomically) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} loss_counts SEC(".maps");

static __always_inline void loss_count(__u32 counter)
{
	__u64 *n = bpf_map_lookup_elem(&loss_counts, &counter);

	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("xdp")
int xdp_loss(struct xdp_md *ctx __attribute__((unused)))
{
	__u32 zero = 0, *threshold = bpf_map_lookup_elem(&loss_config, &zero);

	if (threshold && bpf_get_prandom_u32() < *threshold) {
		loss_count(LOSS_DROPPED);
		return XDP_DROP;
	}
	loss_count(LOSS_PASSED);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
