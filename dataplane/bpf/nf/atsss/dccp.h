/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The DCCP-Data header the downlink sends (RFC 4340 5.1, 5.2): the generic header with 48-bit
 * sequence numbers (X=1), then the options, a Multipath option of the MP_SEQ form
 * (draft-ietf-tsvwg-multipath-dccp, RFC 9897: type 46, length 9, MP_OPT 4, 48-bit number) and
 * Padding to a multiple of 4 bytes; and its checksum (RFC 4340 9.1), over the pseudo-header, the
 * header and options and, with CsCov 0, the UE packet (CsCov 1: not; include/dpp/nf/atsss.h,
 * DPP_ATSSS_HEADER_CHECKSUM, says when). The header is written as seven 32-bit words whose sum is
 * its part of the checksum: nothing of it is read back from the packet. */
#ifndef DPP_NF_ATSSS_DCCP_H
#define DPP_NF_ATSSS_DCCP_H

#include <linux/types.h>
#include <bpf/bpf_endian.h>
#include "dpp/nf/atsss.h"
#include "nf/upf/csum.h"

#define ATSSS_SEQ_MASK ((1ULL << DPP_ATSSS_DCCP_SEQ_BITS) - 1)
#define ATSSS_DCCP_OFF_MASK 0xfff /* offsets in the frame: within the 4 KiB csum_packet reaches */

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

/* The header (checksum 0) and options after the ports, six 32-bit stores of words in network order:
 * doff, CCVal 0 and cscov, the checksum; Res 0, Type Data, X 1, Reserved, the sequence number's
 * high 16 bits; its low 32; MP_SEQ's type, length, MP_OPT and the number's first byte; its next
 * four; its last and three Padding options. Returns the words' sum (unfolded) for the checksum. */
static __always_inline __u64 atsss_fill_dccp_words(struct atsss_dccp_data *d, __u64 seq, __u64 mp_seq, __u8 cscov)
{
	__u32 *w = (__u32 *)d, word;
	__u64 sum;

	word = bpf_htonl((sizeof(*d) / 4) << 24 | (__u32)cscov << 16);
	w[1] = word;
	sum = word;
	word = bpf_htonl((DPP_ATSSS_DCCP_TYPE_DATA << 1 | 1) << 24 | ((seq >> 32) & 0xffff));
	w[2] = word;
	sum += word;
	word = bpf_htonl((__u32)seq);
	w[3] = word;
	sum += word;
	word = bpf_htonl(DPP_ATSSS_DCCP_OPT_MULTIPATH << 24 | DPP_ATSSS_MP_SEQ_LEN << 16 | DPP_ATSSS_MP_SEQ << 8 |
			 ((mp_seq >> 40) & 0xff));
	w[4] = word;
	sum += word;
	word = bpf_htonl((__u32)(mp_seq >> 8));
	w[5] = word;
	sum += word;
	word = bpf_htonl(((__u32)mp_seq & 0xff) << 24 | DPP_ATSSS_DCCP_OPT_PADDING * 0x010101);
	w[6] = word;
	return sum + word;
}

/* The header whole, its ports too (an IPv4 path's come with its template, struct dpp_atsss_path's
 * head4); the seven words' sum. */
static __always_inline __u64 atsss_fill_dccp(struct atsss_dccp_data *d, __be16 sport, __be16 dport,
					     __u64 seq, __u64 mp_seq, __u8 cscov)
{
	d->sport = sport;
	d->dport = dport;
	/* 16-bit words sum as 32-bit ones do, once folded */
	return (__u32)sport + (__u32)dport + atsss_fill_dccp_words(d, seq, mp_seq, cscov);
}

_Static_assert(sizeof(struct atsss_dccp_data) == 7 * 4, "seven words");

/* The DCCP checksum of a packet of dccp_len bytes, given the sums of its header words, of the
 * pseudo-header's addresses and of what else it covers (the UE packet with CsCov 0, else 0): the
 * pseudo-header's protocol and length words are the same sum for IPv4 (zero, protocol, 16-bit
 * length) and IPv6 (32-bit length, zeros, next header) once folded to 16 bits. */
static __always_inline __u16 atsss_dccp_check(__u64 header_sum, __u64 addr_sum, __u32 dccp_len, __u64 covered_sum)
{
	__u64 sum = header_sum + addr_sum + covered_sum + bpf_htonl(dccp_len) + bpf_htonl(DPP_ATSSS_IPPROTO_DCCP);

	return (__u16)~csum_fold(sum);
}

#endif /* DPP_NF_ATSSS_DCCP_H */
