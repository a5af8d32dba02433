/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Incremental Internet checksum updates (RFC 1624) for header rewrites. The one's complement sum
 * is byte-order independent, so network-order words are summed as loaded. */
#ifndef DPP_CORE_CSUM_H
#define DPP_CORE_CSUM_H

#include <linux/types.h>

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)((sum & 0xffff) + (sum >> 16));
}

/* Sum of the difference between n old and n new 32-bit words, to add to a checksum. */
static __always_inline __u64 csum_diff_words(const __u32 *from, const __u32 *to, int n)
{
	__u64 sum = 0;
	int i;

#pragma unroll
	for (i = 0; i < n; i++)
		sum += (__u32)~from[i] + (__u64)to[i];
	return sum;
}

/* HC' = ~(~HC + ~m + m') (RFC 1624, eqn. 3) */
static __always_inline __u16 csum_update(__u16 check, __u64 diff)
{
	return (__u16)~csum_fold((__u16)~check + diff);
}

/* UDP sends "no checksum" as 0, so a computed 0 is sent as its complement (RFC 768). */
static __always_inline __u16 csum_update_udp(__u16 check, __u64 diff)
{
	__u16 sum;

	if (!check)
		return 0;
	sum = csum_update(check, diff);
	return sum ? sum : 0xffff;
}

#endif /* DPP_CORE_CSUM_H */
