// SPDX-License-Identifier: GPL-2.0-only
/* Benchmark harness for BPF_PROG_TEST_RUN: every repetition starts from the original packet.
 *
 * With repeat > 1 the kernel hands the same buffer to every repetition, so a program that rewrites
 * the packet (FORWARD rewrites MACs and the outer IP) would see its own output from the second
 * repetition on. This program writes the original bytes back, then tail-calls the program under
 * test in slot 0 of harness_target. Measured once with an empty program in the slot (the floor)
 * and once with the pipeline, the difference is the pipeline's own cost.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Longest packet the harness can restore; the benchmark's packets are well below it. */
#ifndef HARNESS_MAX_PACKET
#define HARNESS_MAX_PACKET 512
#endif

/* The packet every repetition must see. len equals the test run's packet length. */
struct harness_packet {
	__u32 len;
	__u8 bytes[HARNESS_MAX_PACKET];
};

/* 0 -> the original packet */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct harness_packet);
} harness_packet SEC(".maps");

/* 0 -> the program under test (the pipeline, or an empty program for the floor) */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} harness_target SEC(".maps");

/* ABORTED is what no program under test returns on the benchmark's packets: the benchmark treats
 * it as "the harness failed" (no packet stored, length mismatch, empty slot). */
SEC("xdp")
int harness(struct xdp_md *ctx)
{
	__u32 zero = 0, len;
	struct harness_packet *pkt;

	pkt = bpf_map_lookup_elem(&harness_packet, &zero);
	if (!pkt)
		return XDP_ABORTED;
	len = pkt->len;
	if (len == 0 || len > HARNESS_MAX_PACKET || len != ctx->data_end - ctx->data)
		return XDP_ABORTED;
	if (bpf_xdp_store_bytes(ctx, 0, pkt->bytes, len))
		return XDP_ABORTED;
	/* A constant slot lets the JIT patch in a direct jump: the cheapest tail call there is. */
	bpf_tail_call(ctx, &harness_target, 0);
	return XDP_ABORTED;
}

char LICENSE[] SEC("license") = "GPL";
