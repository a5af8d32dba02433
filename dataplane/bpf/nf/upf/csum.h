/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Whole checksums of headers the UPF builds: the IPv4 header's, and the UDP checksum over IPv6,
 * which covers the UE packet it carries. Sums are of words as they lie in memory (network order
 * in, network order out: the one's complement sum does not care). */
#ifndef DPP_NF_UPF_CSUM_H
#define DPP_NF_UPF_CSUM_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include "core/csum.h"

/* Chunks bpf_csum_diff sums at once (it takes at most 512 bytes), and how many: the UE packets
 * of a 4 KiB page at most. */
#define UPF_CSUM_CHUNK 256
#define UPF_CSUM_CHUNKS 16

static __always_inline __u16 ipv4_header_csum(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u64 sum = 0;
	int i;

#pragma unroll
	for (i = 0; i < (int)(sizeof(*ip) / 2); i++)
		sum += w[i];
	return (__u16)~csum_fold(sum);
}

/* Offsets the sums reach: a page and the chunks after it, masked so the verifier sees pointers
 * within the packet's range. */
#define UPF_CSUM_OFF_MASK 0x1fff

static __always_inline void *csum_at(void *data, __u32 pos)
{
	barrier_var(pos); /* keep the mask: it is what bounds the pointer */
	return data + (pos & UPF_CSUM_OFF_MASK);
}

/* The sum of len bytes (a multiple of 4 below UPF_CSUM_CHUNK) from pos: one helper call per power
 * of two, each of a constant size the verifier can check against end. Each call's offset is
 * computed from len, not added up along the way, and each branch tests a bit shifted out of len,
 * not len (the verifier would narrow len on each side): so the state after a skipped call is the
 * one after a made call, and the verifier walks the six calls once each, not along each of their
 * 64 combinations. */
static __always_inline __s64 csum_rest(void *data, void *end, __u32 pos, __u32 len, __s64 sum)
{
	__u32 size, bit;
	void *p;
	int i;

#pragma unroll
	for (i = 0; i < 6; i++) {
		size = 128 >> i;
		bit = len >> (7 - i);
		barrier_var(bit); /* keep clang from testing len itself */
		if (!(bit & 1))
			continue;
		p = csum_at(data, pos + (len & (0x100 - 2 * size))); /* after the larger sizes' bytes */
		if (p + size > end)
			return -1;
		sum = bpf_csum_diff(NULL, 0, p, size, (__wsum)sum);
	}
	return sum;
}

/* The last 1 to 3 bytes at pos as a word padded with zeros; -1 if they are not in the packet. */
static __always_inline __s64 csum_tail(void *data, void *end, __u32 pos, __u32 len)
{
	__u8 *p = csum_at(data, pos), tail[4] = {};

	if ((void *)(p + 3) <= end) {
		tail[0] = p[0];
		tail[1] = len > 1 ? p[1] : 0;
		tail[2] = len > 2 ? p[2] : 0;
	} else if ((void *)(p + 2) <= end && len <= 2) {
		tail[0] = p[0];
		tail[1] = len > 1 ? p[1] : 0;
	} else if ((void *)(p + 1) <= end && len == 1) {
		tail[0] = p[0];
	} else {
		return -1;
	}
	return *(__u32 *)tail;
}

/* The one's complement sum of the len bytes at off (words in memory order); -1 if they are not all
 * in the packet. The last 1 to 3 bytes count as a word padded with zeros. */
static __always_inline __s64 csum_packet(struct xdp_md *ctx, __u32 off, __u32 len)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end, *p;
	__u32 pos = off & 0xfff;
	__s64 sum = 0, tail;
	int i;

	for (i = 0; i < UPF_CSUM_CHUNKS && len >= UPF_CSUM_CHUNK; i++) {
		p = csum_at(data, pos);
		if (p + UPF_CSUM_CHUNK > end)
			return -1;
		sum = bpf_csum_diff(NULL, 0, p, UPF_CSUM_CHUNK, (__wsum)sum);
		pos += UPF_CSUM_CHUNK;
		len -= UPF_CSUM_CHUNK;
	}
	if (len >= UPF_CSUM_CHUNK)
		return -1;
	sum = csum_rest(data, end, pos, len & ~3u, sum);
	if (sum < 0 || !(len & 3))
		return sum;
	tail = csum_tail(data, end, pos + (len & ~3u), len & 3);
	return tail < 0 ? -1 : sum + tail;
}

#endif /* DPP_NF_UPF_CSUM_H */
