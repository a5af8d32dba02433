/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The one's complement sum of a short run of a frame's bytes: the downlink's UE packet when its DCCP
 * checksum covers it and cannot take its sum from the UE packet's own checksum (nf/atsss/
 * inner_sum.h: UDP without one, another protocol, IPv4 options), and the uplink's DCCP packet whose
 * checksum is checked (nf/atsss/uplink.h). bpf_csum_diff, which csum_packet (nf/upf/csum.h) calls
 * once for each power of two of the length, copies what it sums into a per-CPU scratch buffer
 * first: a UE packet of 114 bytes made three calls, some 30 ns of round-robin's 80 to 104 above the
 * floor (bench/README.md, ATSSS, "The UE packet summed by loads"). Below UPF_CSUM_CHUNK bytes the same
 * pieces are summed here by 8-byte loads; longer runs, whose cost is their bytes', still go to
 * csum_packet. Sums are of words as they lie in memory, as csum_packet's. */
#ifndef DPP_NF_ATSSS_BYTES_SUM_H
#define DPP_NF_ATSSS_BYTES_SUM_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/upf/csum.h"

/* The `size` bytes at p (a constant multiple of 4, at most 128), each 8-byte word's two 32-bit
 * halves added into 64 bits (no carry is lost below 2^32 of them), an odd 4 bytes last. */
static __always_inline __u64 atsss_sum_words(const void *p, const __u32 size)
{
	__u64 sum = 0, w;
	__u32 i;

#pragma unroll
	for (i = 0; i + 8 <= size; i += 8) {
		w = *(const __u64 *)(p + i);
		sum += (w & 0xffffffff) + (w >> 32);
		/* one word at a time: else clang loads all of a 128-byte piece's 16 words first and
		 * spills 12 of them (a frame of 136 bytes, not 40) */
		barrier_var(sum);
	}
	if (size & 4)
		sum += *(const __u32 *)(p + (size & ~7u));
	return sum;
}

/* The piece of `size` bytes (a constant power of two, 4 to 128) of the len bytes from pos, when the
 * length has that bit: after the larger pieces' bytes. Its bit is tested shifted out of len, not len
 * itself, and its offset computed from len (as csum_rest's): the verifier then meets the same state
 * after a piece summed as after one skipped, and walks each piece once. -1: not in the packet. */
static __always_inline __s64 atsss_sum_piece(void *data, void *end, __u32 pos, __u32 len, const __u32 size)
{
	__u32 bit = len / size;
	void *p;

	barrier_var(bit); /* keep clang from testing len itself */
	if (!(bit & 1))
		return 0;
	p = csum_at(data, pos + (len & (0x100 - 2 * size)));
	if (p + size > end)
		return -1;
	return atsss_sum_words(p, size);
}

/* The sum of the len bytes at off (csum_packet's contract: -1 when they are not all in the packet,
 * the last 1 to 3 bytes as a word padded with zeros). */
static __always_inline __s64 atsss_bytes_sum(struct xdp_md *ctx, __u32 off, __u32 len)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 pos = off & 0xfff, size;
	__s64 sum = 0, piece;
	int i;

	if (len >= UPF_CSUM_CHUNK)
		return csum_packet(ctx, off, len);
#pragma unroll
	for (i = 0; i < 6; i++) {
		size = 128 >> i;
		piece = atsss_sum_piece(data, end, pos, len & ~3u, size);
		if (piece < 0)
			return -1;
		sum += piece;
	}
	if (!(len & 3))
		return sum;
	piece = csum_tail(data, end, pos + (len & ~3u), len & 3);
	return piece < 0 ? -1 : sum + piece;
}

#endif /* DPP_NF_ATSSS_BYTES_SUM_H */
