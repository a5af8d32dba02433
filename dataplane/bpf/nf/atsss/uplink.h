/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The uplink: an MP-DCCP packet from a UE on one of its paths (outer IPv4/IPv6, protocol 33, from
 * the UE's address on that access to ours). Its DCCP header is checked (RFC 4340: X=1, a type of
 * Data, Ack or DataAck, the option lengths, the checksum), its path found by addresses and ports,
 * the path's state moved on (the greatest sequence and acknowledgement numbers heard, the time),
 * and a Data or DataAck has its outer IP header, DCCP header and options taken off: the UE packet
 * it carried goes on behind the frame's own link header. A pure Ack is consumed.
 *
 * The proxy's DCCP-Ack to the UE. XDP cannot clone a frame: one frame gets one verdict, and a Data
 * packet's frame is needed whole for its UE packet. The ways left:
 *  - answer by XDP_TX: only a frame with nothing else to do can become the Ack, and a Data frame
 *    always has its UE packet to deliver; the Ack would cost the UE packet;
 *  - broadcast the frame (DEVMAP, BPF_F_BROADCAST) to two entries whose egress programs make one
 *    copy the UE packet and the other the Ack: a real clone, but of the whole frame (payload and
 *    all) for 86 bytes of Ack, two egress programs run, and a devmap entry per access interface;
 *  - a TC program with bpf_clone_redirect: an sk_buff allocated and cloned per acknowledged packet,
 *    after the stack has taken it, and a second pass to cut the clone into an Ack;
 *  - user space sends it: the frame is built here, 86 bytes at most, into a ring (BPF_RINGBUF,
 *    reserve and submit: no copy of the payload, no sk_buff), and a sender moves the ring's frames
 *    to an AF_PACKET socket on the interface named in the record, in batches.
 * The last is the cheapest in the fast path and the only one whose XDP part stays one verdict per
 * frame; the Ack numbers (the path's next sequence number, taken by the same atomic add as the
 * downlink's, and the greatest number received) are decided here, so the sender only transmits
 * and two CPUs never give two Acks one number. Acks are owed every ack_ratio Data packets of a path
 * (RFC 4341's Ack Ratio, a node setting), cumulative: each acknowledges the greatest number
 * received. A full ring loses the Ack, not the UE packet (counted DPP_ATSSS_UP_ACK_LOST); the next
 * one acknowledges the same numbers and more. ATSSS runs in the pipeline (dpp.bpf.o, its stage:
 * nf/atsss/stage.h) as alone; netapp serve's sender (netapp/atsss/acks.py) drains the ring. */
#ifndef DPP_NF_ATSSS_UPLINK_H
#define DPP_NF_ATSSS_UPLINK_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/maps.h"
#include "nf/atsss/dccp.h"
#include "nf/atsss/bytes_sum.h"
#include "nf/atsss/downlink.h"
#include "nf/atsss/loss.h"

/* The generic header with X=1 (RFC 4340 5.1), as an uplink packet has it. */
struct atsss_dccp_hdr {
	__be16 sport;
	__be16 dport;
	__u8 doff;
	__u8 ccval_cscov;
	__be16 check;
	__u8 type_x;
	__u8 reserved;
	__be16 seq_high;
	__be32 seq_low;
};

/* The Acknowledgement Number Subheader with X=1 (5.3). */
struct atsss_dccp_ack_sub {
	__be16 reserved;
	__be16 ack_high;
	__be32 ack_low;
};

/* The Ack the proxy sends (no options). */
struct atsss_dccp_ack {
	struct atsss_dccp_hdr h;
	struct atsss_dccp_ack_sub a;
};

_Static_assert(sizeof(struct atsss_dccp_ack) == DPP_ATSSS_DCCP_HDR_LEN + DPP_ATSSS_DCCP_ACK_LEN,
	       "DCCP-Ack header");

#define ATSSS_SEQ_HALF (1ULL << (DPP_ATSSS_DCCP_SEQ_BITS - 1))
#define ATSSS_CAS_TRIES 4
#define ATSSS_L2_MAX (ETH_HLEN + 8) /* two VLAN tags at most (proto/eth.h) */

/* An uplink packet as the outer parse found it: offsets in the frame, its outer addresses. */
struct atsss_up {
	__u32 l3;     /* the outer IP header (the link header is what is before it) */
	__u32 l4;     /* the DCCP header */
	__u32 ip_end; /* where the outer IP packet ends (link padding after it) */
	__u8 family;
	const __be32 *src; /* the outer addresses, 4 words each (IPv4: the first) */
	const __be32 *dst;
};

/* What the header and options said. */
struct atsss_dccp_read {
	__u64 seq;
	__u64 ack;
	__u32 hdr_len; /* doff * 4: where the UE packet starts, from l4 */
	__u8 type;
};

static __always_inline void count_atsss_uplink(__u32 reason)
{
	__u64 *n = bpf_map_lookup_elem(&dpp_atsss_uplink_stats, &reason);

	if (n)
		(*n)++;
}

/* a after b, modulo 2^48 (RFC 4340 7.1: circular arithmetic) */
static __always_inline bool seq_after(__u64 a, __u64 b)
{
	__u64 d = (a - b) & ATSSS_SEQ_MASK;

	return d && d < ATSSS_SEQ_HALF;
}

/* *at becomes seq if seq is after it (or *at was never set: fresh), by compare-and-swap, so that of
 * two CPUs' numbers the greater stays. Returns the greatest number, *at's or seq. */
static __always_inline __u64 seq_raise(__u64 *at, __u64 seq, bool fresh)
{
	__u64 old;
	int i;

	for (i = 0; i < ATSSS_CAS_TRIES; i++) {
		old = *(volatile __u64 *)at;
		if (!fresh && !seq_after(seq, old))
			return old;
		if (__sync_val_compare_and_swap(at, old, seq) == old)
			return seq;
		fresh = false; /* another CPU set it meanwhile: compare from now on */
	}
	return seq;
}

static __always_inline __u64 seq48(__be16 high, __be32 low)
{
	return ((__u64)bpf_ntohs(high) << 32) | bpf_ntohl(low);
}

/* Options (5.8) between from and to (offsets in the frame): types 0-31 are one byte, the others
 * have a length of at least 2 that must end within the options; a Multipath MP_SEQ is 9 bytes.
 * A global function: its loop is verified once, not in every path that leads to it. */
__attribute__((noinline)) int dpp_atsss_check_options(struct xdp_md *ctx, __u32 from, __u32 to)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *o;
	__u32 len;
	int i;

	for (i = 0; i < DPP_ATSSS_MAX_OPTIONS; i++) {
		if (from >= to)
			return 0;
		o = data + (from & ATSSS_DCCP_OFF_MASK);
		if ((void *)(o + 1) > end)
			return DPP_ATSSS_UP_TRUNC_OPTIONS;
		if (o[0] < 32) {
			from++;
			continue;
		}
		if (from + 2 > to || (void *)(o + 3) > end)
			return DPP_ATSSS_UP_TRUNC_OPTIONS;
		len = o[1];
		if (len < 2 || (o[0] == DPP_ATSSS_DCCP_OPT_MULTIPATH && o[2] == DPP_ATSSS_MP_SEQ &&
				len != DPP_ATSSS_MP_SEQ_LEN))
			return DPP_ATSSS_UP_BAD_OPTIONS;
		if (from + len > to)
			return DPP_ATSSS_UP_TRUNC_OPTIONS;
		from += len;
	}
	return from >= to ? 0 : DPP_ATSSS_UP_BAD_OPTIONS;
}

/* The sum of the outer addresses, the pseudo-header's part that is not the length and protocol. */
static __always_inline __u64 atsss_up_addr_sum(const struct atsss_up *u)
{
	return (__u64)u->src[0] + u->src[1] + u->src[2] + u->src[3] + u->dst[0] + u->dst[1] + u->dst[2] +
	       u->dst[3];
}

/* The sum of the `covered` bytes of the DCCP packet at l4 (-1: not all there), by loads below 256
 * bytes (nf/atsss/bytes_sum.h). A global function: its pieces and csum_packet's loop are verified once. */
__attribute__((noinline)) __s64 dpp_atsss_sum_dccp(struct xdp_md *ctx, __u32 l4, __u32 covered)
{
	return atsss_bytes_sum(ctx, l4, covered);
}

/* The checksum (9.1, 9.2): over the pseudo-header and the bytes CsCov covers (0: all; n: the header
 * and options and n - 1 words of the payload, which must be there). */
static __always_inline int atsss_check_csum(struct xdp_md *ctx, const struct atsss_up *u, __u8 cscov,
					    __u32 hdr_len)
{
	__u32 dccp_len = u->ip_end - u->l4, covered = dccp_len;
	__s64 sum;

	if (cscov) {
		covered = hdr_len + (cscov - 1) * 4;
		if (covered > dccp_len)
			return DPP_ATSSS_UP_BAD_CHECKSUM;
	}
	sum = dpp_atsss_sum_dccp(ctx, u->l4, covered);
	if (sum < 0)
		return DPP_ATSSS_UP_BAD_CHECKSUM;
	sum += atsss_up_addr_sum(u) + bpf_htonl(dccp_len) + bpf_htonl(DPP_ATSSS_IPPROTO_DCCP);
	return csum_fold(sum) == 0xffff ? 0 : DPP_ATSSS_UP_BAD_CHECKSUM;
}

/* The header (5.1, 5.3), its options and checksum: 0 and *r, or the reason it is not valid. */
static __always_inline int atsss_read_dccp(struct xdp_md *ctx, const struct atsss_up *u,
					   const struct atsss_dccp_hdr *h, struct atsss_dccp_read *r)
{
	void *data = (void *)(long)ctx->data;
	struct atsss_dccp_ack_sub *a = (void *)(h + 1);
	__u32 fixed;
	int reason;

	r->type = (h->type_x >> 1) & 0xf;
	if (!(h->type_x & 1) || (r->type != DPP_ATSSS_DCCP_TYPE_DATA && r->type != DPP_ATSSS_DCCP_TYPE_ACK &&
				 r->type != DPP_ATSSS_DCCP_TYPE_DATAACK))
		return DPP_ATSSS_UP_BAD_HEADER;
	r->seq = seq48(h->seq_high, h->seq_low);
	fixed = sizeof(*h);
	if (r->type != DPP_ATSSS_DCCP_TYPE_DATA) {
		fixed += sizeof(*a);
		if ((void *)(a + 1) > data + u->ip_end || (void *)(a + 1) > (void *)(long)ctx->data_end)
			return DPP_ATSSS_UP_TRUNC_HEADER;
		r->ack = seq48(a->ack_high, a->ack_low);
	}
	r->hdr_len = h->doff * 4;
	if (r->hdr_len < fixed)
		return DPP_ATSSS_UP_BAD_HEADER;
	if (u->l4 + r->hdr_len > u->ip_end)
		return DPP_ATSSS_UP_TRUNC_OPTIONS;
	reason = dpp_atsss_check_options(ctx, u->l4 + fixed, u->l4 + r->hdr_len);
	if (reason)
		return reason;
	return atsss_check_csum(ctx, u, h->ccval_cscov & 0xf, r->hdr_len);
}

/* A Data packet's UE packet, at inner: an IPv4 or IPv6 packet from the session's UE address. */
static __always_inline bool atsss_inner_from_ue(struct xdp_md *ctx, __u32 inner, __u32 ip_end,
						 const struct dpp_atsss_uplink *up)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u8 *ip = data + (inner & ATSSS_DCCP_OFF_MASK);
	struct ipv6hdr *ip6 = (void *)ip;
	struct iphdr *ip4 = (void *)ip;

	if ((void *)(ip + 1) > end || inner >= ip_end)
		return false;
	if (up->family == 4)
		return (ip[0] >> 4) == 4 && (void *)(ip4 + 1) <= end && inner + sizeof(*ip4) <= ip_end &&
		       ip4->saddr == up->ue[0];
	if ((ip[0] >> 4) != 6 || (void *)(ip6 + 1) > end || inner + sizeof(*ip6) > ip_end)
		return false;
	return ip6->saddr.in6_u.u6_addr32[0] == up->ue[0] && ip6->saddr.in6_u.u6_addr32[1] == up->ue[1] &&
	       ip6->saddr.in6_u.u6_addr32[2] == up->ue[2] && ip6->saddr.in6_u.u6_addr32[3] == up->ue[3];
}

/* The DCCP-Ack at d, from our port to the UE's, its checksum over the pseudo-header (addr_sum). */
static __always_inline void atsss_fill_ack(struct atsss_dccp_ack *d, const struct atsss_dccp_hdr *h,
					   __u64 seq, __u64 ack, __u64 addr_sum)
{
	const __u16 *w = (const __u16 *)d;
	__u64 sum = addr_sum + bpf_htonl(sizeof(*d)) + bpf_htonl(DPP_ATSSS_IPPROTO_DCCP);
	int i;

	d->h.sport = h->dport;
	d->h.dport = h->sport;
	d->h.doff = sizeof(*d) / 4;
	d->h.ccval_cscov = 0;
	d->h.check = 0;
	d->h.type_x = (DPP_ATSSS_DCCP_TYPE_ACK << 1) | 1;
	d->h.reserved = 0;
	d->h.seq_high = bpf_htons((seq >> 32) & 0xffff);
	d->h.seq_low = bpf_htonl((__u32)seq);
	d->a.reserved = 0;
	d->a.ack_high = bpf_htons((ack >> 32) & 0xffff);
	d->a.ack_low = bpf_htonl((__u32)ack);
#pragma unroll
	for (i = 0; i < (int)(sizeof(*d) / 2); i++)
		sum += w[i];
	d->h.check = (__u16)~csum_fold(sum);
}

/* The Ack's IP header, from our address (the packet's destination) back to the UE's; its length. */
static __always_inline __u32 atsss_fill_ack_ip(void *at, const struct atsss_up *u)
{
	if (u->family == 4) {
		atsss_fill_ipv4(at, u->dst[0], u->src[0], (__u64)u->dst[0] + u->src[0], sizeof(struct atsss_dccp_ack));
		return sizeof(struct iphdr);
	}
	atsss_fill_ipv6(at, u->dst, u->src, sizeof(struct atsss_dccp_ack));
	return sizeof(struct ipv6hdr);
}

/* The link header of the Ack: the frame's own (VLAN tags kept), its addresses swapped. */
static __always_inline int atsss_fill_ack_l2(struct xdp_md *ctx, __u8 *frame, __u32 l2_len)
{
	struct ethhdr *eth = (void *)frame;
	__u8 mac[ETH_ALEN];

	if (l2_len < ETH_HLEN || l2_len > ATSSS_L2_MAX || bpf_xdp_load_bytes(ctx, 0, frame, l2_len))
		return -1;
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	return 0;
}

/* Whether this Data packet of the path owes the UE an Ack: every ack_ratio-th. */
static __always_inline bool atsss_ack_owed(struct dpp_atsss_path_rx *rx, const struct dpp_atsss_config *cfg)
{
	__u64 n = __sync_fetch_and_add(&rx->unacked, 1) + 1;
	__u32 ratio = cfg && cfg->ack_ratio > 1 ? cfg->ack_ratio : 1;

	return ratio == 1 || n % ratio == 0;
}

/* The Ack into the ring: our next sequence number on the path, acknowledging `ack`. */
static __always_inline int atsss_send_ack(struct xdp_md *ctx, const struct atsss_up *u,
					  const struct atsss_dccp_hdr *h, struct dpp_atsss_path *p, __u64 ack)
{
	__u32 l2 = u->l3 & 0x1f, ip_len;
	struct dpp_atsss_ack *r;
	struct atsss_dccp_ack *d;
	__u64 seq;

	r = bpf_ringbuf_reserve(&dpp_atsss_acks, sizeof(*r), 0);
	if (!r)
		return -1;
	if (atsss_fill_ack_l2(ctx, r->frame, l2)) {
		bpf_ringbuf_discard(r, 0);
		return -1;
	}
	*(__be16 *)&r->frame[(l2 - 2) & 0x1f] = bpf_htons(u->family == 4 ? ETH_P_IP : ETH_P_IPV6);
	ip_len = atsss_fill_ack_ip(&r->frame[l2 & 0x1f], u);
	d = (void *)&r->frame[(l2 + ip_len) & 0x3f];
	seq = __sync_fetch_and_add(&p->dccp_seq, 1) & ATSSS_SEQ_MASK;
	atsss_fill_ack(d, h, seq, ack & ATSSS_SEQ_MASK, atsss_up_addr_sum(u));
	r->ifindex = ctx->ingress_ifindex;
	r->len = l2 + ip_len + sizeof(*d);
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* The UE packet at inner (to ip_end) behind the frame's link header: what was between them goes,
 * link padding after ip_end too; the link header's EtherType becomes the UE packet's. */
static __always_inline int atsss_decap(struct xdp_md *ctx, const struct atsss_up *u, __u32 inner, __u8 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 frame_len = end - data, l2 = u->l3 & 0x1f; /* masked for the verifier, checked below */
	__be16 proto = bpf_htons(family == 4 ? ETH_P_IP : ETH_P_IPV6);
	__u8 head[ATSSS_L2_MAX] = {};

	if (l2 != u->l3 || l2 < ETH_HLEN || l2 > ATSSS_L2_MAX || inner < l2 || u->ip_end > frame_len)
		return -1;
	if (u->ip_end < frame_len && bpf_xdp_adjust_tail(ctx, (int)u->ip_end - (int)frame_len))
		return -1;

	if (bpf_xdp_load_bytes(ctx, 0, head, l2) || bpf_xdp_adjust_head(ctx, (int)(inner - l2)))
		return -1;
	if (bpf_xdp_store_bytes(ctx, 0, head, l2) || bpf_xdp_store_bytes(ctx, l2 - 2, &proto, sizeof(proto)))
		return -1;
	return 0;
}

static __always_inline void atsss_count_rx(__u32 slot, __u32 bytes, bool data)
{
	struct dpp_atsss_path_stats *st = bpf_map_lookup_elem(&dpp_atsss_path_stats, &slot);

	if (!st)
		return;
	if (data) {
		st->rx_packets++;
		st->rx_bytes += bytes;
	} else {
		st->rx_acks++;
	}
}

/* The path's state moved on by a valid packet: when heard, the greatest numbers received. */
static __always_inline void atsss_heard(struct dpp_atsss_path_rx *rx, const struct atsss_dccp_read *r,
					__u64 *gsr)
{
	bool fresh = !*(volatile __u64 *)&rx->last_heard_ns;

	rx->last_heard_ns = bpf_ktime_get_ns();
	*gsr = seq_raise(&rx->gsr, r->seq, fresh);
	if (r->type != DPP_ATSSS_DCCP_TYPE_DATA)
		seq_raise(&rx->gar, r->ack, fresh);
}

/* The uplink for the DCCP packet at u->l4: DPP_ATSSS_UP_DECAPSULATED (the frame is now the UE packet,
 * behind its link header), DPP_ATSSS_UP_ACK (consumed), or the reason it is not valid MP-DCCP of a
 * known path (the frame untouched; DPP_ATSSS_UP_ACK_LOST is not returned, only counted). */
static __always_inline int atsss_uplink(struct xdp_md *ctx, const struct atsss_up *u,
					const struct dpp_atsss_config *cfg)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct atsss_dccp_hdr *h = data + (u->l4 & ATSSS_DCCP_OFF_MASK);
	struct dpp_atsss_uplink_key key = { .family = u->family };
	struct dpp_atsss_path_rx *rx;
	struct dpp_atsss_uplink *up;
	struct atsss_dccp_read r = {};
	struct dpp_atsss_path *p;
	__u64 gsr;
	__u32 slot, inner;
	int reason;

	if ((void *)(h + 1) > end || u->l4 + sizeof(*h) > u->ip_end)
		return DPP_ATSSS_UP_TRUNC_HEADER;
	key.sport = h->sport;
	key.dport = h->dport;
	__builtin_memcpy(key.peer, u->src, sizeof(key.peer));
	__builtin_memcpy(key.local, u->dst, sizeof(key.local));
	up = bpf_map_lookup_elem(&dpp_atsss_uplink, &key);
	if (!up)
		return DPP_ATSSS_UP_UNKNOWN_PATH;
	reason = atsss_read_dccp(ctx, u, h, &r);
	if (reason)
		return reason;
	inner = u->l4 + r.hdr_len;
	if (r.type != DPP_ATSSS_DCCP_TYPE_ACK && !atsss_inner_from_ue(ctx, inner, u->ip_end, up))
		return DPP_ATSSS_UP_BAD_INNER;
	slot = up->path;
	p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);
	rx = bpf_map_lookup_elem(&dpp_atsss_path_rx, &slot);
	if (!p || !rx)
		return DPP_ATSSS_UP_UNKNOWN_PATH;
	atsss_heard(rx, &r, &gsr);
	if (r.type != DPP_ATSSS_DCCP_TYPE_DATA)
		atsss_count_loss(ctx, rx, r.ack, u->l4 + sizeof(*h) + sizeof(struct atsss_dccp_ack_sub),
				 u->l4 + r.hdr_len);
	if (r.type == DPP_ATSSS_DCCP_TYPE_ACK) {
		atsss_count_rx(slot, 0, false);
		return DPP_ATSSS_UP_ACK;
	}
	atsss_count_rx(slot, u->ip_end - inner, true);
	if (atsss_ack_owed(rx, cfg) && atsss_send_ack(ctx, u, h, p, gsr))
		count_atsss_uplink(DPP_ATSSS_UP_ACK_LOST);
	/* h is not read after this: the decapsulation moves the head */
	return atsss_decap(ctx, u, inner, up->family) ? DPP_ATSSS_UP_BAD_INNER : DPP_ATSSS_UP_DECAPSULATED;
}

#endif /* DPP_NF_ATSSS_UPLINK_H */
