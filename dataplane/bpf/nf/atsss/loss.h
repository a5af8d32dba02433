/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A path's loss, from the Ack Vectors (RFC 4340 11.4) of the UE's Acks and DataAcks: the numbers of
 * ours the UE reports received or not, each judged once (the estimator and its bounds:
 * include/dpp/nf/atsss.h, struct dpp_atsss_path_rx).
 *
 * Judging runs in "k" space: k numbers back from the Ack's acknowledgement number A (k = 0 is A),
 * where the vector's bytes lie in order, each run covering run length + 1 consecutive k. The
 * numbers after the mark M up to A - DPP_ATSSS_LOSS_REORDER are k from DPP_ATSSS_LOSS_REORDER to
 * (A - M) - 1; the arithmetic modulo 2^48 is done once, in that difference. */
#ifndef DPP_NF_ATSSS_LOSS_H
#define DPP_NF_ATSSS_LOSS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/dccp.h"

#define ATSSS_VECTOR_LOST 3	/* state "not yet received" */
#define ATSSS_VECTOR_RESERVED 2 /* a state RFC 4340 reserves: counted neither way */
#define ATSSS_VECTOR_RUN 0x3f
/* the farthest k a vector read whole reaches */
#define ATSSS_VECTOR_REACH (DPP_ATSSS_ACK_VECTOR_MAX * (ATSSS_VECTOR_RUN + 1))
#define ATSSS_LOSS_HALF (1ULL << (DPP_ATSSS_DCCP_SEQ_BITS - 1))

/* The Ack Vector among the options from `from` to `to` (offsets in the frame, their lengths checked
 * by dpp_atsss_check_options before): the offset of its first state byte << 8 | the number of state
 * bytes; 0: none. A global function: its loop is verified once. */
__attribute__((noinline)) int dpp_atsss_find_ack_vector(struct xdp_md *ctx, __u32 from, __u32 to)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *o;
	int i;

	for (i = 0; i < DPP_ATSSS_MAX_OPTIONS; i++) {
		if (from + 2 > to)
			return 0;
		o = data + (from & ATSSS_DCCP_OFF_MASK);
		if ((void *)(o + 2) > end)
			return 0;
		if (o[0] < 32) {
			from++;
			continue;
		}
		if (o[0] == DPP_ATSSS_DCCP_OPT_ACK_VECTOR0 || o[0] == DPP_ATSSS_DCCP_OPT_ACK_VECTOR1)
			return o[1] > 2 ? (int)((from + 2) << 8 | (o[1] - 2)) : 0;
		if (o[1] < 2)
			return 0;
		from += o[1];
	}
	return 0;
}

/* A walk over a vector's state bytes (copied out of the frame) counting the k from near to far. */
struct atsss_vector_walk {
	__u8 bytes[DPP_ATSSS_ACK_VECTOR_MAX];
	__u32 len;
	__u32 near;
	__u32 far;
	__u32 k; /* the first k of the byte at hand */
	__u64 delivered;
	__u64 lost;
};

/* One state byte: its run's k within near..far counted by the state. bpf_loop's callback: verified
 * once, where a loop's 64 bytes with a branch each would be verified path by path. */
static long atsss_vector_step(__u64 i, void *arg)
{
	struct atsss_vector_walk *w = arg;
	__u32 run, lo, hi;
	__u8 b;

	if (i >= w->len || w->k > w->far)
		return 1;
	b = w->bytes[i & (DPP_ATSSS_ACK_VECTOR_MAX - 1)];
	run = b & ATSSS_VECTOR_RUN;
	lo = w->k > w->near ? w->k : w->near;
	hi = w->k + run < w->far ? w->k + run : w->far;
	if (lo <= hi && b >> 6 == ATSSS_VECTOR_LOST)
		w->lost += hi - lo + 1;
	else if (lo <= hi && b >> 6 != ATSSS_VECTOR_RESERVED)
		w->delivered += hi - lo + 1;
	w->k += run + 1;
	return 0;
}

_Static_assert((DPP_ATSSS_ACK_VECTOR_MAX & (DPP_ATSSS_ACK_VECTOR_MAX - 1)) == 0, "a mask of the bytes");

/* Of the k from near to far, those the vector of `len` state bytes at `at` reports, added to
 * *delivered and *lost. Bytes past DPP_ATSSS_ACK_VECTOR_MAX are not read (their numbers are counted
 * neither way). */
static __always_inline void atsss_count_vector(struct xdp_md *ctx, __u32 at, __u32 len, __u32 near, __u32 far,
					       __u64 *delivered, __u64 *lost)
{
	struct atsss_vector_walk w = { .near = near, .far = far };
	__u32 last;

	/* The count as its last byte's index, clamped, plus one: 6.1's verifier (Debian 12) learns no
	 * lower bound from a test for zero, and the helper refuses a size that may be 0. */
	if (!len)
		return;
	last = len - 1;
	barrier_var(last);
	w.len = (last < DPP_ATSSS_ACK_VECTOR_MAX - 1 ? last : DPP_ATSSS_ACK_VECTOR_MAX - 1) + 1;
	if (bpf_xdp_load_bytes(ctx, at, w.bytes, w.len))
		return;
	bpf_loop(DPP_ATSSS_ACK_VECTOR_MAX, atsss_vector_step, &w, 0);
	*delivered = w.delivered;
	*lost = w.lost;
}

/* An Ack or DataAck of the path acknowledging `ack`, its options from `from` to `to`: the numbers
 * it judges counted. The first vector of the path only sets the mark; a vector whose Ack moves the
 * mark no further (an old or repeated Ack), or that another CPU's Ack overtook, counts nothing. */
static __always_inline void atsss_count_loss(struct xdp_md *ctx, struct dpp_atsss_path_rx *rx, __u64 ack,
					     __u32 from, __u32 to)
{
	int vector = dpp_atsss_find_ack_vector(ctx, from, to);
	__u64 mark, back, horizon = (ack - DPP_ATSSS_LOSS_REORDER) & ATSSS_SEQ_MASK;
	__u64 delivered = 0, lost = 0;

	if (!vector)
		return;
	mark = *(volatile __u64 *)&rx->loss_mark;
	if (!(mark & DPP_ATSSS_LOSS_MARKED)) {
		__sync_val_compare_and_swap(&rx->loss_mark, mark, DPP_ATSSS_LOSS_MARKED | horizon);
		return;
	}
	back = (ack - mark) & ATSSS_SEQ_MASK; /* the mark's k: the bit above 48 falls out */
	if (back <= DPP_ATSSS_LOSS_REORDER || back >= ATSSS_LOSS_HALF)
		return;
	if (__sync_val_compare_and_swap(&rx->loss_mark, mark, DPP_ATSSS_LOSS_MARKED | horizon) != mark)
		return;
	atsss_count_vector(ctx, vector >> 8, vector & 0xff, DPP_ATSSS_LOSS_REORDER,
			   back - 1 < ATSSS_VECTOR_REACH ? back - 1 : ATSSS_VECTOR_REACH, &delivered, &lost);
	__sync_fetch_and_add(&rx->delivered, delivered);
	__sync_fetch_and_add(&rx->lost, lost);
}

#endif /* DPP_NF_ATSSS_LOSS_H */
