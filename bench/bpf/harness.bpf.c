// SPDX-License-Identifier: GPL-2.0-only
/* Benchmark harness for BPF_PROG_TEST_RUN: every repetition starts from the original packet, and
 * (harness_walk) belongs to another flow of a pseudo-random walk over N flows.
 *
 * With repeat > 1 the kernel hands the same buffer to every repetition, so a program that rewrites
 * the packet (FORWARD rewrites MACs and the outer IP) would see its own output from the second
 * repetition on. This program writes the original bytes back, then tail-calls the program under
 * test in slot 0 of harness_target. Measured once with an empty program in the slot (the floor)
 * and once with the pipeline, the difference is the pipeline's own cost.
 */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

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

/* Writes the original packet back over this repetition's buffer; false when it cannot (no packet
 * stored, or a length other than this run's). */
static __always_inline bool restore_packet(struct xdp_md *ctx)
{
	__u32 zero = 0, len;
	struct harness_packet *pkt;

	pkt = bpf_map_lookup_elem(&harness_packet, &zero);
	if (!pkt)
		return false;
	len = pkt->len;
	if (len == 0 || len > HARNESS_MAX_PACKET || len != ctx->data_end - ctx->data)
		return false;
	return !bpf_xdp_store_bytes(ctx, 0, pkt->bytes, len);
}

/* ABORTED is what no program under test returns on the benchmark's packets: the benchmark treats
 * it as "the harness failed" (no packet stored, length mismatch, empty slot). */
SEC("xdp")
int harness(struct xdp_md *ctx)
{
	if (!restore_packet(ctx))
		return XDP_ABORTED;
	/* A constant slot lets the JIT patch in a direct jump: the cheapest tail call there is. */
	bpf_tail_call(ctx, &harness_target, 0);
	return XDP_ABORTED;
}

/* How harness_walk turns the stored packet into flow f of N: the TEID and the UE source address
 * become teid_base + f and src_base + f. f walks with a stride coprime with N, so N repetitions
 * visit every flow once, and consecutive flows are far apart (no prefetcher helps). A checksum
 * over both fields (at csum_off, 0: none) is kept right: a packet whose flow is told by checksummed
 * fields (the outer addresses of MP-DCCP, in its pseudo-header) stays valid. Both fields must lie
 * at an even distance from where the checksummed words start. */
struct harness_walk {
	__u32 flows;	 /* N */
	__u32 stride;	 /* coprime with N, below it */
	__u32 position;	 /* f of the next repetition */
	__u32 teid_base; /* host order */
	__u32 src_base;	 /* host order */
	__u16 teid_off;	 /* where the TEID sits in the packet */
	__u16 src_off;	 /* where the UE source address sits */
	__u16 csum_off;	 /* where a 16-bit Internet checksum over both sits; 0: none */
	__u16 reserved;
};

/* 0 -> the walk */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct harness_walk);
} harness_walk_state SEC(".maps");

/* The next flow of the walk: its number, and the walk advanced. */
static __always_inline __u32 walk_next(struct harness_walk *w)
{
	__u32 f = w->position, next = f + w->stride;

	w->position = next >= w->flows ? next - w->flows : next;
	return f;
}

static __always_inline int store_be32(struct xdp_md *ctx, __u32 off, __u32 value)
{
	__u32 be = bpf_htonl(value);

	return bpf_xdp_store_bytes(ctx, off, &be, sizeof(be));
}

/* The checksum at csum_off updated for the two fields' change from `from` to `to` (RFC 1624). */
static __always_inline int fix_checksum(struct xdp_md *ctx, __u32 off, __be32 *from, __be32 *to)
{
	__u16 check;
	__u32 sum;

	if (bpf_xdp_load_bytes(ctx, off, &check, sizeof(check)))
		return -1;
	sum = bpf_csum_diff(from, 8, to, 8, (__u16)~check);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	check = (__u16)~sum;
	return bpf_xdp_store_bytes(ctx, off, &check, sizeof(check));
}

/* The original packet as the walk's next flow, then the program under test. */
static __always_inline int walk_and_call(struct xdp_md *ctx)
{
	__be32 from[2] = {}, to[2];
	struct harness_walk *w;
	__u32 zero = 0, f;

	w = bpf_map_lookup_elem(&harness_walk_state, &zero);
	if (!w || !w->flows || !restore_packet(ctx))
		return XDP_ABORTED;
	f = walk_next(w);
	to[0] = bpf_htonl(w->teid_base + f);
	to[1] = bpf_htonl(w->src_base + f);
	if (w->csum_off && (bpf_xdp_load_bytes(ctx, w->teid_off, &from[0], 4) ||
			    bpf_xdp_load_bytes(ctx, w->src_off, &from[1], 4)))
		return XDP_ABORTED;
	if (store_be32(ctx, w->teid_off, w->teid_base + f) ||
	    store_be32(ctx, w->src_off, w->src_base + f))
		return XDP_ABORTED;
	if (w->csum_off && fix_checksum(ctx, w->csum_off, from, to))
		return XDP_ABORTED;
	bpf_tail_call(ctx, &harness_target, 0);
	return XDP_ABORTED;
}

/* harness, then the packet rewritten to the walk's next flow. Run once with the empty program in
 * the slot, the rewrite is part of the floor. */
SEC("xdp")
int harness_walk(struct xdp_md *ctx)
{
	return walk_and_call(ctx);
}

/* harness_walk for programs that move the packet's head (decapsulation, encapsulation): the
 * repetition before left the packet's start elsewhere, so the head first moves back to where the
 * stored packet starts. The end must not have moved (such programs do not trim the tail of the
 * benchmark's packets), and metadata a program put in front of it (FRER's stream handle) goes. Every
 * repetition pays the one bpf_xdp_adjust_head, the floor's too. */
SEC("xdp")
int harness_walk_head(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct harness_packet *pkt;
	__u32 zero = 0;
	int len = end - data, meta;

	asm volatile("" : "+r"(len)); /* a scalar from here: no pointer arithmetic in 32 bits */
	pkt = bpf_map_lookup_elem(&harness_packet, &zero);
	if (!pkt || bpf_xdp_adjust_head(ctx, len - (int)pkt->len))
		return XDP_ABORTED;
	meta = (int)(ctx->data - ctx->data_meta);
	if (meta && bpf_xdp_adjust_meta(ctx, meta)) /* metadata the repetition before put in front */
		return XDP_ABORTED;
	return walk_and_call(ctx);
}

char LICENSE[] SEC("license") = "GPL";
