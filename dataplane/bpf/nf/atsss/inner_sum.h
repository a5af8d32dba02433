/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The one's complement sum of the UE packet the downlink's DCCP checksum covers (CsCov 0), taken
 * from the UE packet's own TCP or UDP checksum instead of its bytes, as Linux's local checksum
 * offload does for a tunnel's outer checksum (Documentation/networking/checksum-offloads.rst, LCO):
 * a segment whose checksum is right sums, with its pseudo-header, to zero (0xffff), so the
 * segment's sum is the complement of its pseudo-header's, which is made of the IP header's
 * fields. The IP header itself is summed word by word (its own checksum is not trusted), but for
 * its addresses: they are in the pseudo-header too, and cancel out of header - pseudo-header.
 *
 * When the UE packet's checksum is wrong (it was corrupted before it reached us), the DCCP checksum
 * made so is wrong by the same amount: the UE's DCCP drops the packet its transport would have
 * dropped, and its Ack Vector reports that number not received, so the path's loss estimate
 * (nf/atsss/loss.h) counts one loss the data network made. Whole checksums are what a NIC hands
 * over; a veth's partial ones (transmit checksum offload on in the sending namespace) would be
 * wrong in the UE packet already, whoever computes the DCCP checksum.
 *
 * Only where the derivation holds: TCP, or UDP with a checksum (0: none, over IPv4, and over IPv6
 * for the tunnels RFC 6935 lets send it), in an IPv4
 * header without options that is not a fragment (a first fragment's checksum covers the whole
 * datagram) or an IPv6 header with no extension header, the L4 length the IP header's; anything
 * else gets -1, and the caller sums the bytes. */
#ifndef DPP_NF_ATSSS_INNER_SUM_H
#define DPP_NF_ATSSS_INNER_SUM_H

#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include "core/csum.h"

#define ATSSS_IP_MF_OFFSET 0x3fff /* More Fragments and the fragment offset */

/* The offset of the L4 checksum within its header, or 0 when the protocol has none to derive from. */
static __always_inline __u32 l4_check_offset(__u8 proto)
{
	if (proto == IPPROTO_TCP)
		return 16;
	if (proto == IPPROTO_UDP)
		return 6;
	return 0;
}

/* A sum below 2^48 whose one's complement negation is a subtraction: 2^48 - 1 is 0xffff times
 * 0x100010001, so it is zero in one's complement, and what is left of it less x is -x; no fold. */
#define ATSSS_CSUM_ZERO48 0xffffffffffffULL

/* The segment's sum given its pseudo-header's (unfolded, below 2^48): -pseudo in one's complement. */
static __always_inline __u64 segment_sum(__u64 pseudo_sum)
{
	return ATSSS_CSUM_ZERO48 - pseudo_sum;
}

/* An IPv4 header of 20 bytes (the caller checked its first byte, 0x45). */
static __always_inline __s64 inner_sum4(const struct iphdr *ip, void *end, __u32 ue_len)
{
	const __u32 *w = (const __u32 *)ip;
	__u8 proto = ip->protocol;
	__u32 l4_len = ue_len - sizeof(*ip), check_at = l4_check_offset(proto);
	const __u16 *check;

	if ((ip->frag_off & bpf_htons(ATSSS_IP_MF_OFFSET)) || !check_at || bpf_ntohs(ip->tot_len) != ue_len ||
	    ue_len < sizeof(*ip) + check_at + sizeof(*check))
		return -1;
	check = (void *)(ip + 1) + (check_at & 0x1f);
	if ((void *)(check + 1) > end || (proto == IPPROTO_UDP && !*check))
		return -1;
	/* the header's words, and the pseudo-header's negated: its addresses (w[3], w[4]) cancel */
	return (__u64)w[0] + w[1] + w[2] + segment_sum(bpf_htonl((__u32)proto << 16 | l4_len));
}

static __always_inline __s64 inner_sum6(const struct ipv6hdr *ip6, void *end, __u32 ue_len)
{
	const __u32 *w = (const __u32 *)ip6;
	__u8 proto = ip6->nexthdr;
	__u32 l4_len = ue_len - sizeof(*ip6), check_at = l4_check_offset(proto);
	const __u16 *check;

	if (!check_at || bpf_ntohs(ip6->payload_len) != l4_len || ue_len < sizeof(*ip6) + check_at + sizeof(*check))
		return -1;
	check = (void *)(ip6 + 1) + (check_at & 0x1f);
	if ((void *)(check + 1) > end || (proto == IPPROTO_UDP && !*check))
		return -1;
	/* the header's words, and the pseudo-header's negated: the addresses cancel */
	return (__u64)w[0] + w[1] + segment_sum((__u64)bpf_htonl(l4_len) + bpf_htonl(proto));
}

/* The sum of the UE packet at `ip` (ue_len bytes, the frame up to `end`) from its headers and L4
 * checksum, or -1 when it must be summed byte by byte. */
static __always_inline __s64 atsss_inner_sum(void *ip, void *end, __u32 ue_len)
{
	__u8 version_ihl;

	if (ip + sizeof(struct iphdr) > end)
		return -1;
	version_ihl = *(__u8 *)ip;
	if (version_ihl == 0x45) /* IPv4 without options */
		return inner_sum4(ip, end, ue_len);
	if (version_ihl >> 4 == 4)
		return -1;
	if (ip + sizeof(struct ipv6hdr) > end)
		return -1;
	return inner_sum6(ip, end, ue_len);
}

#endif /* DPP_NF_ATSSS_INNER_SUM_H */
