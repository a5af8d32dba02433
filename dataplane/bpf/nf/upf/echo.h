/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* GTP-U path management (TS 29.281 7.2): an Echo Request to our address is answered here, XDP_TX,
 * with an Echo Response carrying the Recovery IE (restart counter 0, as 7.2.2 asks of GTP-U): the
 * addresses of its IP header and ports swapped, and when N3 comes inside VXLAN, those of the outer
 * Ethernet and IP headers too (dpp_upf_echo_vxlan). Inside other overlays: not answered here. */
#ifndef DPP_NF_UPF_ECHO_H
#define DPP_NF_UPF_ECHO_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "core/parse.h"
#include "proto/overlay.h"
#include "nf/upf/csum.h"
#include "nf/upf/encap.h"
#include "nf/upf/output.h"

#define GTP_ECHO_REQUEST 1
#define GTP_ECHO_RESPONSE 2
#define GTP_IE_RECOVERY 14
#define UPF_ECHO_MAX 12 /* the response's GTP-U header with its optional octets */

static __always_inline void swap_ports(struct udphdr *udp)
{
	__be16 port = udp->source;

	udp->source = udp->dest;
	udp->dest = port;
}

/* The IP and UDP headers of the response: addresses and ports swapped, lengths of the new size. */
static __always_inline int echo_ip4(struct iphdr *ip, struct udphdr *udp, __u32 udp_len)
{
	__be32 addr = ip->saddr;

	if (*(__u8 *)ip != 0x45)
		return -1;
	ip->saddr = ip->daddr;
	ip->daddr = addr;
	ip->tot_len = bpf_htons(sizeof(*ip) + udp_len);
	ip->check = 0;
	ip->check = ipv4_header_csum(ip);
	swap_ports(udp);
	udp->len = bpf_htons(udp_len);
	udp->check = 0;
	return 0;
}

static __always_inline int echo_ip6(struct xdp_md *ctx, struct ipv6hdr *ip6, struct udphdr *udp,
				    __u32 udp_off, __u32 udp_len)
{
	struct in6_addr addr = ip6->saddr;
	__u16 check;

	if (ip6->nexthdr != IPPROTO_UDP)
		return -1;
	ip6->saddr = ip6->daddr;
	ip6->daddr = addr;
	ip6->payload_len = bpf_htons(udp_len);
	swap_ports(udp);
	udp->len = bpf_htons(udp_len);
	udp->check = 0;
	if (udp6_csum(ctx, udp_off, udp_len, ip6, &check))
		return -1;
	udp->check = check;
	return 0;
}

/* The response's UDP length: its GTP-U header (with the optional octets when the request had
 * them, the extension chain dropped) and the Recovery IE. */
static __always_inline __u32 echo_udp_len(const struct gtpu_hdr *gtp)
{
	return sizeof(struct udphdr) + sizeof(*gtp) + ((gtp->flags & GTP_FLAGS_EXT_SEQ_PN) ? 4 : 0) + 2;
}

/* Write the response's GTP-U message over the request's (the packet already has its new size). */
static __always_inline int echo_gtp(struct gtpu_hdr *gtp, void *end)
{
	__u8 *ie = (__u8 *)(gtp + 1);

	if ((void *)(ie + 2) > end)
		return -1;
	if (gtp->flags & GTP_FLAGS_EXT_SEQ_PN) {
		ie += 4;
		if ((void *)(ie + 2) > end)
			return -1;
		ie[-1] = 0; /* no extension header follows */
	}
	gtp->flags &= ~0x04;
	gtp->type = GTP_ECHO_RESPONSE;
	gtp->length = bpf_htons(ie + 2 - (__u8 *)(gtp + 1));
	ie[0] = GTP_IE_RECOVERY;
	ie[1] = 0;
	return 0;
}

/* The response's IP and UDP headers (of family 4 or 6, the IP header at l3, UDP at l4), the
 * packet already of its new size: 0, or -1 when a header is not where it should be. */
static __always_inline int echo_ip(struct xdp_md *ctx, __u8 family, __u32 l3, __u32 l4, __u32 udp_len)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct udphdr *udp = data + bounded_offset(l4);
	void *ip = data + bounded_offset(l3);

	if ((void *)(udp + 1) > end)
		return -1;
	if (family == 4)
		return ip + sizeof(struct iphdr) > end ? -1 : echo_ip4(ip, udp, udp_len);
	return ip + sizeof(struct ipv6hdr) > end ? -1 : echo_ip6(ctx, ip, udp, l4, udp_len);
}

/* The outermost IP header is its fixed part alone (no IPv4 options, no IPv6 extension headers): the
 * one a response's lengths are written for. Checked before the packet is changed, so that another
 * goes on to the pipeline as it came. */
static __always_inline int echo_outer_fixed(const struct dpp_layers *l)
{
	__u32 fixed = l->outer_family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);

	return l->outer_l4 == l->outer_l3 + fixed;
}

/* The outer headers of VXLAN around a response: MACs and IP addresses swapped, the UDP ports kept
 * (the peer's VTEP listens on 4789, its source port is its flow's entropy), lengths of the new size,
 * the IPv4 header's checksum, UDP's 0; over IPv6 UDP's computed, over the whole datagram (the inner
 * one's done already). */
static __always_inline int echo_vxlan_outer(struct xdp_md *ctx, const struct dpp_layers *l,
					    __u32 udp_len)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 l3 = bounded_offset(l->outer_l3), l4 = bounded_offset(l->outer_l4);
	struct udphdr *udp = data + l4;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	struct iphdr *ip;
	struct in6_addr addr6;
	__be32 addr;
	__u16 check;

	if ((void *)(eth + 1) > end || (void *)(udp + 1) > end)
		return -1;
	swap_macs(eth);
	udp->len = bpf_htons(udp_len);
	udp->check = 0;
	if (l->outer_family == 4) {
		ip = data + l3;
		if ((void *)(ip + 1) > end || *(__u8 *)ip != 0x45)
			return -1;
		addr = ip->saddr;
		ip->saddr = ip->daddr;
		ip->daddr = addr;
		ip->tot_len = bpf_htons(sizeof(*ip) + udp_len);
		ip->check = 0;
		ip->check = ipv4_header_csum(ip);
		return 0;
	}
	ip6 = data + l3;
	if ((void *)(ip6 + 1) > end)
		return -1;
	addr6 = ip6->saddr;
	ip6->saddr = ip6->daddr;
	ip6->daddr = addr6;
	ip6->payload_len = bpf_htons(udp_len);
	if (udp6_csum(ctx, l4, udp_len, ip6, &check))
		return -1;
	udp->check = check;
	return 0;
}

/* The outer headers of a VXLAN response of outer UDP length udp_len (echo_vxlan_outer): 0 or -1. A
 * global function apart from dpp_upf_echo_vxlan, as the UPF calls them one after the other: with a
 * checksum over IPv6 inlined each, one function's stack frame would not fit behind the UPF's. */
__attribute__((noinline)) int dpp_upf_echo_vxlan_outer(struct xdp_md *ctx, const struct dpp_layers *l,
						       __u32 udp_len)
{
	if (!l)
		return -1;
	return echo_vxlan_outer(ctx, l, udp_len);
}

/* An Echo Request inside VXLAN (outer Ethernet/IP/UDP 4789/VXLAN, the inner Ethernet/IP/UDP 2152/
 * GTP-U): answered with the inner headers as without VXLAN; the outer UDP length of the response,
 * whose outer headers dpp_upf_echo_vxlan_outer then writes, or -1 (a global function: the verifier
 * walks it once, apart from the UPF's). */
__attribute__((noinline)) int dpp_upf_echo_vxlan(struct xdp_md *ctx, const struct dpp_layers *l)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 out_l4, in_l2, in_l3, in_l4, udp_len;
	struct udphdr *vx_udp;
	struct ethhdr *in_eth;
	struct gtpu_hdr *gtp;
	__u8 family, *ip;

	if (!l || l->outer_proto != IPPROTO_UDP || !l->outer_l4 || !echo_outer_fixed(l))
		return -1;
	out_l4 = bounded_offset(l->outer_l4);
	in_l2 = out_l4 + sizeof(struct udphdr) + sizeof(struct vxlan_hdr);
	in_l3 = bounded_offset(l->tun_l3);
	vx_udp = data + out_l4;
	ip = data + in_l3;
	gtp = data + bounded_offset(l->gtp);
	if ((void *)(vx_udp + 1) > end || vx_udp->dest != bpf_htons(DPP_PORT_VXLAN) ||
	    in_l3 < in_l2 + sizeof(struct ethhdr) || (void *)(ip + 1) > end || (void *)(gtp + 1) > end ||
	    gtp->type != GTP_ECHO_REQUEST)
		return -1;
	family = *ip >> 4;
	in_l4 = in_l3 + (family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr));
	udp_len = echo_udp_len(gtp);
	if ((family != 4 && family != 6) || in_l4 + sizeof(struct udphdr) != l->gtp ||
	    bpf_xdp_adjust_tail(ctx, (int)(in_l4 + udp_len) - (int)(end - data)))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	in_eth = data + bounded_offset(in_l2);
	gtp = data + bounded_offset(l->gtp);
	if ((void *)(in_eth + 1) > end || (void *)(gtp + 1) > end || echo_gtp(gtp, end))
		return -1;
	swap_macs(in_eth);
	if (echo_ip(ctx, family, in_l3, in_l4, udp_len))
		return -1;
	return in_l4 + udp_len - out_l4;
}

/* Answer the Echo Request whose GTP-U header is at layers->gtp. XDP_TX, or -1: not answered here
 * (the packet is then as it came). */
static __always_inline int upf_echo(struct xdp_md *ctx, const struct dpp_layers *l)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 gtp_off = bounded_offset(l->gtp), l4 = bounded_offset(l->outer_l4), udp_len;
	struct gtpu_hdr *gtp = data + gtp_off;
	struct ethhdr *eth;
	struct udphdr *udp;
	int outer_len;
	void *ip;

	if (l->tun_l3 != l->outer_l3) {
		outer_len = dpp_upf_echo_vxlan(ctx, l);
		if (outer_len < 0 || dpp_upf_echo_vxlan_outer(ctx, l, outer_len))
			return -1;
		return XDP_TX;
	}
	if ((void *)(gtp + 1) > end || gtp->type != GTP_ECHO_REQUEST || !echo_outer_fixed(l))
		return -1;
	udp_len = echo_udp_len(gtp);
	if (bpf_xdp_adjust_tail(ctx, (int)(l4 + udp_len) - (int)(end - data)))
		return -1;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	ip = data + bounded_offset(l->outer_l3);
	udp = data + l4;
	gtp = data + gtp_off;
	if ((void *)(eth + 1) > end || (void *)(udp + 1) > end || (void *)(gtp + 1) > end ||
	    echo_gtp(gtp, end))
		return -1;
	swap_macs(eth);
	if (l->outer_family == 4) {
		if (ip + sizeof(struct iphdr) > end || echo_ip4(ip, udp, udp_len))
			return -1;
	} else if (ip + sizeof(struct ipv6hdr) > end || echo_ip6(ctx, ip, udp, l4, udp_len)) {
		return -1;
	}
	return XDP_TX;
}

#endif /* DPP_NF_UPF_ECHO_H */
