/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The DCCP-Data header the downlink sends (RFC 4340 5.1, 5.2): the generic header with 48-bit
 * sequence numbers (X=1), then the options, a Multipath option of the MP_SEQ form
 * (draft-ietf-tsvwg-multipath-dccp, RFC 9897: type 46, length 9, MP_OPT 4, 48-bit number) and
 * Padding to a multiple of 4 bytes; and its checksum (RFC 4340 9.1), over the pseudo-header and,
 * with CsCov 0, the whole DCCP packet. */
#ifndef DPP_NF_ATSSS_DCCP_H
#define DPP_NF_ATSSS_DCCP_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>
#include "dpp/nf/atsss.h"
#include "nf/upf/csum.h"

#define ATSSS_SEQ_MASK ((1ULL << DPP_ATSSS_DCCP_SEQ_BITS) - 1)

struct atsss_dccp_data {
	__be16 sport;
	__be16 dport;
	__u8 doff;	   /* header and options, in 32-bit words */
	__u8 ccval_cscov;  /* CCVal (high 4 bits) 0, CsCov (low 4 bits) 0: the whole packet */
	__be16 check;
	__u8 type_x;	   /* Res (3 bits) 0, Type (4 bits), X (1 bit) 1 */
	__u8 reserved;
	__be16 seq_high;   /* sequence number, its high 16 bits */
	__be32 seq_low;    /* and its low 32 */
	__u8 mp_type;	   /* DPP_ATSSS_DCCP_OPT_MULTIPATH */
	__u8 mp_len;	   /* DPP_ATSSS_MP_SEQ_LEN */
	__u8 mp_opt;	   /* DPP_ATSSS_MP_SEQ */
	__u8 mp_seq[6];	   /* the connection-level sequence number, network order */
	__u8 padding[3];   /* Padding options */
};

_Static_assert(sizeof(struct atsss_dccp_data) == DPP_ATSSS_DCCP_HDR_LEN + DPP_ATSSS_OPTIONS_LEN,
	       "DCCP-Data header and options");

/* The header, checksum 0: the checksum is summed over it afterwards. */
static __always_inline void atsss_fill_dccp(struct atsss_dccp_data *d, __be16 sport, __be16 dport,
					    __u64 seq, __u64 mp_seq)
{
	int i;

	d->sport = sport;
	d->dport = dport;
	d->doff = sizeof(*d) / 4;
	d->ccval_cscov = 0;
	d->check = 0;
	d->type_x = (DPP_ATSSS_DCCP_TYPE_DATA << 1) | 1;
	d->reserved = 0;
	d->seq_high = bpf_htons((seq >> 32) & 0xffff);
	d->seq_low = bpf_htonl((__u32)seq);
	d->mp_type = DPP_ATSSS_DCCP_OPT_MULTIPATH;
	d->mp_len = DPP_ATSSS_MP_SEQ_LEN;
	d->mp_opt = DPP_ATSSS_MP_SEQ;
#pragma unroll
	for (i = 0; i < 6; i++)
		d->mp_seq[i] = mp_seq >> (40 - 8 * i);
#pragma unroll
	for (i = 0; i < 3; i++)
		d->padding[i] = DPP_ATSSS_DCCP_OPT_PADDING;
}

/* The DCCP checksum of the dccp_len bytes at off, given the sum of the pseudo-header's addresses:
 * the pseudo-header's protocol and length words are the same sum for IPv4 (zero, protocol, 16-bit
 * length) and IPv6 (32-bit length, zeros, next header) once folded to 16 bits. -1 if the bytes are
 * not all in the packet. */
static __always_inline int atsss_dccp_csum(struct xdp_md *ctx, __u32 off, __u32 dccp_len,
					   __u64 addr_sum, __u16 *check)
{
	__s64 sum = csum_packet(ctx, off, dccp_len);

	if (sum < 0)
		return -1;
	sum += addr_sum + bpf_htonl(dccp_len) + bpf_htonl(DPP_ATSSS_IPPROTO_DCCP);
	*check = (__u16)~csum_fold(sum);
	return 0;
}

#endif /* DPP_NF_ATSSS_DCCP_H */
