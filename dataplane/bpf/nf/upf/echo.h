/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* GTP-U path management (TS 29.281 7.2): an Echo Request to our address is answered here, XDP_TX,
 * with an Echo Response carrying the Recovery IE (restart counter 0, as 7.2.2 asks of GTP-U). Only
 * when GTP-U is the outermost tunnel (no overlay around it): the response swaps the addresses of the
 * one IP header. */
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

/* Answer the Echo Request whose GTP-U header is at layers->gtp. XDP_TX, or -1: not answered here
 * (the packet is then as it came, unless the IP header turned out to have options). */
static __always_inline int upf_echo(struct xdp_md *ctx, const struct dpp_layers *l)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 gtp_off = bounded_offset(l->gtp), l4 = bounded_offset(l->outer_l4), udp_len;
	struct gtpu_hdr *gtp = data + gtp_off;
	struct ethhdr *eth;
	struct udphdr *udp;
	void *ip;

	if (l->tun_l3 != l->outer_l3 || (void *)(gtp + 1) > end || gtp->type != GTP_ECHO_REQUEST)
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
