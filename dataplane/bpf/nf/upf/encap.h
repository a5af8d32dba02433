/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Outer header creation (TS 29.244 8.2.56, GTP-U/UDP/IPv4 or IPv6): Ethernet (addresses filled in
 * by the output), the outer IP header from our address to the peer's, UDP 2152 to 2152, and a GTP-U
 * header (TS 29.281) with one PDU Session Container (TS 38.415) carrying the QFI (none when the PDR's
 * pdu_type is DPP_UPF_PDU_NO_CONTAINER: the tunnel action's packets that came without). UDP/IPv4 or IPv6
 * (DPP_UPF_PDR_UDP): the same without GTP-U, UDP from and to the peer's port. IPv4: header checksum
 * computed, UDP checksum 0 (RFC 768); IPv6: UDP checksum computed over the whole datagram (RFC 8200
 * 8.1). */
#ifndef DPP_NF_UPF_ENCAP_H
#define DPP_NF_UPF_ENCAP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/consts.h"
#include "dpp/nf/upf.h"
#include "proto/eth.h"
#include "proto/gtpu.h"
#include "nf/upf/csum.h"

#define UPF_TTL 64
#define GTP_FLAGS_V1_PT_E 0x34
#define GTP_FLAGS_V1_PT 0x30

/* GTP-U header, its optional octets and a 4-octet PDU Session Container: 16 bytes. */
struct upf_gtpu_psc {
	struct gtpu_hdr gtp;
	__be16 seq;
	__u8 npdu;
	__u8 next;	 /* GTP_EXT_PDU_SESSION */
	__u8 psc_len;	 /* 1: 4 octets */
	__u8 psc_type;	 /* PDU type << 4 */
	__u8 psc_qfi;
	__u8 psc_next;	 /* 0: the chain ends */
};

#define UPF_ENCAP4 (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr) + \
		    sizeof(struct upf_gtpu_psc))
#define UPF_ENCAP6 (sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct udphdr) + \
		    sizeof(struct upf_gtpu_psc))

static __always_inline bool has_container(const struct dpp_upf_pdr *pdr)
{
	return pdr->pdu_type != DPP_UPF_PDU_NO_CONTAINER;
}

static __always_inline void fill_gtpu(struct upf_gtpu_psc *g, const struct dpp_upf_pdr *pdr,
				      __u32 ue_len)
{
	g->gtp.type = GTP_TPDU;
	g->gtp.teid = bpf_htonl(pdr->teid);
	if (!has_container(pdr)) {
		g->gtp.flags = GTP_FLAGS_V1_PT;
		g->gtp.length = bpf_htons(ue_len);
		return;
	}
	g->gtp.flags = GTP_FLAGS_V1_PT_E;
	g->gtp.length = bpf_htons(ue_len + sizeof(*g) - sizeof(g->gtp));
	g->seq = 0;
	g->npdu = 0;
	g->next = GTP_EXT_PDU_SESSION;
	g->psc_len = 1;
	g->psc_type = pdr->pdu_type << 4;
	g->psc_qfi = pdr->qfi & 0x3f;
	g->psc_next = 0;
}

/* The bytes of the tunnel's own header after UDP: GTP-U's (with its container, or without), or none
 * (UDP/IP alone). */
static __always_inline __u32 tunnel_len(const struct dpp_upf_pdr *pdr)
{
	if (pdr->flags & DPP_UPF_PDR_UDP)
		return 0;
	return has_container(pdr) ? sizeof(struct upf_gtpu_psc) : sizeof(struct gtpu_hdr);
}

/* UDP, and the GTP-U header after it unless the tunnel is UDP alone. */
static __always_inline void fill_udp(struct udphdr *udp, const struct dpp_upf_pdr *pdr, __u32 ue_len)
{
	__u32 tun = tunnel_len(pdr);
	__be16 port = tun ? bpf_htons(DPP_PORT_GTPU) : bpf_htons(pdr->teid);

	udp->source = port;
	udp->dest = port;
	udp->len = bpf_htons(sizeof(*udp) + tun + ue_len);
	udp->check = 0;
	if (tun)
		fill_gtpu((void *)(udp + 1), pdr, ue_len);
}

/* A tunnel's outer IPv4 header, from the PDR's local to its peer, carrying len bytes of proto
 * (also GRE's: nf/tunnel/gre.h). */
static __always_inline void fill_outer4(struct iphdr *ip, const struct dpp_upf_pdr *pdr, __u8 proto,
					__u32 len)
{
	*(__u8 *)ip = 0x45;
	ip->tos = 0;
	ip->tot_len = bpf_htons(sizeof(*ip) + len);
	ip->id = 0;
	ip->frag_off = 0;
	ip->ttl = UPF_TTL;
	ip->protocol = proto;
	ip->check = 0;
	ip->saddr = pdr->local[0];
	ip->daddr = pdr->peer[0];
	ip->check = ipv4_header_csum(ip);
}

/* A tunnel's outer IPv6 header, from the PDR's local to its peer, carrying len bytes of proto. */
static __always_inline void fill_outer6(struct ipv6hdr *ip6, const struct dpp_upf_pdr *pdr,
					__u8 proto, __u32 len)
{
	*(__be32 *)ip6 = bpf_htonl(6 << 28);
	ip6->payload_len = bpf_htons(len);
	ip6->nexthdr = proto;
	ip6->hop_limit = UPF_TTL;
	__builtin_memcpy(&ip6->saddr, pdr->local, sizeof(ip6->saddr));
	__builtin_memcpy(&ip6->daddr, pdr->peer, sizeof(ip6->daddr));
}

static __always_inline int encap4(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr, __u32 ue_len)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip + 1);

	if (data + UPF_ENCAP4 > end) /* also UDP alone: the UE packet is longer than GTP-U's header */
		return -1;
	eth->h_proto = bpf_htons(ETH_P_IP);
	fill_outer4(ip, pdr, IPPROTO_UDP, sizeof(*udp) + tunnel_len(pdr) + ue_len);
	fill_udp(udp, pdr, ue_len);
	return 0;
}

/* The UDP checksum of an IPv6 datagram: the pseudo-header (RFC 8200 8.1) and every UDP byte. */
static __always_inline int udp6_csum(struct xdp_md *ctx, __u32 udp_off, __u32 udp_len,
				     const struct ipv6hdr *ip6, __u16 *check)
{
	__s64 sum = csum_packet(ctx, udp_off, udp_len);
	__u16 folded;

	if (sum < 0)
		return -1;
	sum += (__u64)ip6->saddr.in6_u.u6_addr32[0] + ip6->saddr.in6_u.u6_addr32[1] +
	       ip6->saddr.in6_u.u6_addr32[2] + ip6->saddr.in6_u.u6_addr32[3] +
	       ip6->daddr.in6_u.u6_addr32[0] + ip6->daddr.in6_u.u6_addr32[1] +
	       ip6->daddr.in6_u.u6_addr32[2] + ip6->daddr.in6_u.u6_addr32[3];
	sum += bpf_htonl(udp_len) + bpf_htonl(IPPROTO_UDP);
	folded = (__u16)~csum_fold(sum);
	*check = folded ? folded : 0xffff;
	return 0;
}

/* A global function, verified once: its checksum's loops over the UE packet would multiply the
 * states of every path upf_encap is inlined in (nf/upf/upf.h inlines the PDR's action). */
__attribute__((noinline)) int dpp_upf_encap6(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
					     __u32 ue_len)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct udphdr *udp = (void *)(ip6 + 1);
	__u32 udp_len;
	__u16 check;

	if (!pdr || data + UPF_ENCAP6 > end)
		return -1;
	udp_len = sizeof(*udp) + tunnel_len(pdr) + ue_len;
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	fill_outer6(ip6, pdr, IPPROTO_UDP, udp_len);
	fill_udp(udp, pdr, ue_len);
	if (udp6_csum(ctx, sizeof(*eth) + sizeof(*ip6), udp_len, ip6, &check))
		return -1;
	udp->check = check;
	return 0;
}

/* The length of the IP packet at l3 (family 4 or 6), as its header says. */
static __always_inline __u32 ip_len_at(void *data, void *end, __u32 l3, __u8 family)
{
	void *ip = data + bounded_offset(l3);

	if (family == 4) {
		struct iphdr *ip4 = ip;

		return (void *)(ip4 + 1) <= end ? bpf_ntohs(ip4->tot_len) : 0;
	}
	if ((void *)((struct ipv6hdr *)ip + 1) > end)
		return 0;
	return sizeof(struct ipv6hdr) + bpf_ntohs(((struct ipv6hdr *)ip)->payload_len);
}

/* Make the IP packet at l3 (family 4 or 6) follow hdr bytes of new headers, the first an Ethernet
 * header with the frame's MACs: what is before the packet goes, link padding after it too. Its
 * length, or 0 when the packet could not be made so (no headroom). Tunnels of other kinds build
 * their headers the same way (nf/tunnel/gre.h). */
static __always_inline __u32 upf_encap_room(struct xdp_md *ctx, __u32 l3, __u8 family, int hdr)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 ue_len = ip_len_at(data, end, l3, family), frame_len = end - data;
	__u16 macs[ETH_ALEN];

	if (!ue_len || l3 + ue_len > frame_len)
		return 0;
	if (l3 + ue_len < frame_len && bpf_xdp_adjust_tail(ctx, (int)(l3 + ue_len) - (int)frame_len))
		return 0;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + sizeof(macs) > end)
		return 0;
	eth_set_addrs(macs, data, data + ETH_ALEN); /* kept: the output may leave them as they are */
	if (bpf_xdp_adjust_head(ctx, (int)bounded_offset(l3) - hdr))
		return 0;
	data = (void *)(long)ctx->data;
	if (data + sizeof(macs) > (void *)(long)ctx->data_end)
		return 0;
	eth_set_addrs(data, macs, macs + ETH_ALEN / 2);
	return ue_len;
}

/* Put the IP packet at l3 (family 4 or 6: what is before it goes, link padding after it too) into
 * the PDR's tunnel. 0, or -1 when the packet could not be made so (no headroom). */
static __always_inline int upf_encap(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr, __u32 l3,
				     __u8 family)
{
	int hdr = (pdr->family == 6 ? UPF_ENCAP6 : UPF_ENCAP4) - (int)sizeof(struct upf_gtpu_psc) +
		  (int)tunnel_len(pdr);
	__u32 ue_len = upf_encap_room(ctx, l3, family, hdr);

	if (!ue_len)
		return -1;
	return pdr->family == 6 ? dpp_upf_encap6(ctx, pdr, ue_len) : encap4(ctx, pdr, ue_len);
}

#endif /* DPP_NF_UPF_ENCAP_H */
