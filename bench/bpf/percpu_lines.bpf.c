// SPDX-License-Identifier: GPL-2.0-only
/* Where the kernel puts a per-CPU array's values (or, with ROWS, a plain mmapable array's): for
 * each of the array's slots, this CPU's value's offset in its cache line, counted by offset, and whether the value crosses into the next line
 * (bench/qos/layouts.py). VALUE_SIZE and SLOTS are given at build time. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef VALUE_SIZE
#define VALUE_SIZE 32
#endif
#ifndef SLOTS
#define SLOTS 1000001
#endif
#define LINE 64
#define CROSSING LINE /* the histogram's slot for values that cross a line */

struct value {
	char bytes[VALUE_SIZE];
};

/* slot -> a value of VALUE_SIZE bytes per CPU, allocated as dpp_policer_stats was; with ROWS, a
 * plain mmapable array as it is now (this CPU's row: the first, slots after slot 0 alike) */
struct {
#ifdef ROWS
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
#else
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
#endif
	__uint(max_entries, SLOTS);
	__type(key, __u32);
	__type(value, struct value);
} values SEC(".maps");

/* offset in the line (0..63) -> values found there; CROSSING -> values that cross a line */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LINE + 1);
	__type(key, __u32);
	__type(value, __u64);
} offsets SEC(".maps");

/* 0 -> a value's address, stored and read back: the verifier allows no arithmetic on the pointer
 * itself, a privileged program may store it and read the number. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} address SEC(".maps");

static __always_inline void count(__u32 slot)
{
	__u64 *n = bpf_map_lookup_elem(&offsets, &slot);

	if (n)
		(*n)++;
}

static long locate(__u64 index, void *ctx __attribute__((unused)))
{
	__u32 slot = index + 1, zero = 0, offset;
	void *value = bpf_map_lookup_elem(&values, &slot);
	__u64 *kept = bpf_map_lookup_elem(&address, &zero);

	if (!value || !kept)
		return 1;
	*kept = (__u64)value;
	offset = *(volatile __u64 *)kept & (LINE - 1);
	count(offset);
	if (offset + VALUE_SIZE > LINE)
		count(CROSSING);
	return 0;
}

SEC("xdp")
int percpu_lines(struct xdp_md *ctx __attribute__((unused)))
{
	bpf_loop(SLOTS - 1, locate, NULL, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
