/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The N3 fast path: two header layouts, parsed at fixed offsets (core/parse.h parses the rest).
 *
 * An N3 (or N9) facing node sees two layouts far more than any other: GTP-U as a gNB (or a peer
 * UPF) sends it, untagged Ethernet / IPv4 / UDP 2152 / GTP-U T-PDU carrying one PDU Session
 * Container (or no extension at all) / UE IPv4 or IPv6 / UDP, TCP or SCTP; and the same GTP-U
 * behind Ethernet / IPv4 / UDP 4789 / VXLAN with a VNI, every IPv4 header without options and the
 * UE's IPv6 header without extension headers. The staged
 * parser pays for its generality on each of those packets: up to seven stage calls, a bounds check
 * per header, offsets carried from stage to stage. In these layouts every header sits at a fixed
 * offset, so one bounds check covers them all and every check the staged parser makes becomes a
 * compare with a constant (or, for the length fields, of numbers already loaded). The fast path
 * only ever says "mine, and here is the key" or "not mine": on any doubt the packet is parsed again
 * from its first byte by the staged parser, so correctness never rests on the fast path, which must
 * only never accept a packet that the staged parser would parse differently
 * (tests/dataplane/test_fast_path.py holds it to that). */
#ifndef DPP_CORE_N3_H
#define DPP_CORE_N3_H

#include <linux/udp.h>
#include <linux/tcp.h>
#include "core/parse.h"

/* Offsets from the start of the frame: the outer IPv4 and UDP headers (both layouts), VXLAN and
 * what it carries, and where each layout's tunnel (the IPv4 header carrying GTP-U) lies. */
#define N3_IP (sizeof(struct ethhdr))
#define N3_UDP (N3_IP + sizeof(struct iphdr))
#define N3_VXLAN (N3_UDP + sizeof(struct udphdr))
#define N3_INNER_ETH (N3_VXLAN + sizeof(struct vxlan_hdr))
#define N3_INNER_IP (N3_INNER_ETH + sizeof(struct ethhdr))
#define N3_INNER_UDP (N3_INNER_IP + sizeof(struct iphdr))
#define N3_TUN_PLAIN N3_IP	 /* GTP-U right in the outer IPv4 */
#define N3_TUN_VXLAN N3_INNER_IP /* GTP-U in the IPv4 VXLAN carries */
/* From the tunnel's IPv4 header: its UDP header, GTP-U, the optional octets (sequence, N-PDU
 * number, next type), the container (length 1, PDU type, QFI, next type 0), the UE packet after it
 * or, without extension, right after the GTP-U header. */
#define N3_GTP(tun) ((tun) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define N3_GTP_OPT(tun) (N3_GTP(tun) + sizeof(struct gtpu_hdr))
#define N3_PSC(tun) (N3_GTP_OPT(tun) + 4)
#define N3_UE_PSC(tun) (N3_PSC(tun) + 4)
#define N3_UE_PLAIN(tun) N3_GTP_OPT(tun)
/* What each layout needs up to the UE's UDP header (or the ports of its TCP header): the length the
 * bounds check covers. The header fields the fast path reads before it knows the layout (through
 * the container, at N3_UE_PSC) all lie within the shorter one. */
#define N3_UE_LEN (sizeof(struct iphdr) + sizeof(struct udphdr))
#define N3_UE6_LEN (sizeof(struct ipv6hdr) + sizeof(struct udphdr)) /* checked once it is IPv6 */
#define N3_MIN_LEN(tun) (N3_UE_PLAIN(tun) + N3_UE_LEN)
_Static_assert(N3_UE_PSC(N3_TUN_PLAIN) <= N3_MIN_LEN(N3_TUN_PLAIN), "the container lies within");
_Static_assert(N3_MIN_LEN(N3_TUN_PLAIN) <= N3_MIN_LEN(N3_TUN_VXLAN), "plain is the shorter layout");

#define GTP_FLAGS_V1_PT 0x30 /* version 1, protocol type GTP; the spare bit 0x08 is not checked */
#define GTP_FLAGS_E 0x04
#define IPV4_VERSION_IHL5 0x45

/* An IPv4 header the staged parser would take as a whole datagram: version 4, IHL 5, not a
 * non-first fragment. Its total length is checked with the others (n3_lengths_ok). */
static __always_inline bool n3_ipv4_ok(const struct iphdr *ip)
{
	return *(const __u8 *)ip == IPV4_VERSION_IHL5 &&
	       !(ip->frag_off & bpf_htons(IPV4_FRAG_OFFSET));
}

/* An IPv4/UDP header pair at ip_off to UDP port dport, the IPv4 header as n3_ipv4_ok says. */
static __always_inline bool n3_ipv4_udp_ok(void *data, __u32 ip_off, __u16 dport)
{
	const struct iphdr *ip = data + ip_off;
	const struct udphdr *udp = data + ip_off + sizeof(*ip);

	return n3_ipv4_ok(ip) && ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(dport);
}

/* VXLAN's part of the VXLAN layout, after an outer IPv4/UDP to the VXLAN port: a VNI, and an
 * untagged IPv4/UDP to GTP-U inside. */
static __always_inline bool n3_vxlan_ok(void *data)
{
	const struct ethhdr *inner_eth = data + N3_INNER_ETH;
	const struct vxlan_hdr *vx = data + N3_VXLAN;

	return (vx->flags & bpf_htonl(VXLAN_F_I)) && inner_eth->h_proto == bpf_htons(ETH_P_IP) &&
	       n3_ipv4_udp_ok(data, N3_INNER_IP, DPP_PORT_GTPU);
}

/* What the staged parser requires of a UE L4 header: its length, or 0 for a protocol the fast path
 * leaves to it. */
static __always_inline __u32 n3_l4_len(__u8 proto)
{
	switch (proto) {
	case IPPROTO_UDP:
		return sizeof(struct udphdr);
	case IPPROTO_TCP:
		return sizeof(struct tcphdr);
	case IPPROTO_SCTP:
		return SCTP_COMMON_HDR_LEN;
	}
	return 0;
}

/* The IPv4/UDP datagram at ip_off, as the staged parser bounds it: 0 when the IPv4 datagram does
 * not end within limit (the frame, or the datagram around it), else where what it carries must end
 * (the IPv4 datagram's end or the UDP length's, whichever comes first). */
static __always_inline __u32 n3_datagram_end(void *data, __u32 ip_off, __u32 limit)
{
	const struct iphdr *ip = data + ip_off;
	const struct udphdr *udp = data + ip_off + sizeof(*ip);
	__u32 ip_end = ip_off + bpf_ntohs(ip->tot_len);
	__u32 udp_end = ip_off + sizeof(*ip) + bpf_ntohs(udp->len);

	if (ip_end > limit)
		return 0;
	return udp_end < ip_end ? udp_end : ip_end;
}

/* The lengths, as the staged parser reads them (from data, in a frame of frame_len bytes): every
 * datagram ends within the frame and within the datagram and UDP payload around it, the UE's up to
 * ue_end, and the UE's L4 header, up to l4_end, within the UE datagram. Total lengths of at least a
 * header follow. */
static __always_inline bool n3_lengths_ok(void *data, __u32 frame_len, __u32 tun, __u32 ue_end,
					  __u32 l4_end)
{
	__u32 limit = n3_datagram_end(data, N3_IP, frame_len);

	if (tun == N3_TUN_VXLAN)
		limit = n3_datagram_end(data, N3_INNER_IP, limit);
	return ue_end <= limit && l4_end <= ue_end;
}

/* The UE packet at ue, ue_off from data (its first N3_UE_LEN bytes within the frame), the lengths
 * aside, as the staged parser takes it: an IPv4 header n3_ipv4_ok takes, or an IPv6 header whose
 * next header is the L4 header (an extension header, which n3_l4_len does not know, is left to the
 * staged parser), followed by a UDP, TCP or SCTP header. Its family (4 or 6: decided here once,
 * so the verifier knows which header's bounds were checked), where that L4 header must end and
 * where the UE datagram ends, from data; 0 for anything else. */
static __always_inline __u8 n3_ue(const void *ue, void *end, __u32 ue_off, __u32 *l4_end,
				  __u32 *ue_end)
{
	const struct ipv6hdr *ip6 = ue;
	const struct iphdr *ip = ue;
	__u32 l4_off, l4_len;
	__u8 proto, family;

	if (n3_ipv4_ok(ip)) {
		family = 4;
		proto = ip->protocol;
		l4_off = ue_off + sizeof(*ip);
		*ue_end = ue_off + bpf_ntohs(ip->tot_len);
	} else if ((*(const __u8 *)ip >> 4) == 6 && (void *)ip6 + N3_UE6_LEN <= end) {
		family = 6;
		proto = ip6->nexthdr;
		l4_off = ue_off + sizeof(*ip6);
		*ue_end = l4_off + bpf_ntohs(ip6->payload_len);
	} else {
		return 0;
	}
	l4_len = n3_l4_len(proto);
	*l4_end = l4_off + l4_len;
	return l4_len ? family : 0;
}

/* Where the UE packet of a GTP-U T-PDU (its IPv4 tunnel at tun) starts: after exactly one PDU
 * Session Container of 4 octets that ends the chain (E set; S and PN only say their fields are
 * there, which they are anyway with E), or right after the header (E, S and PN clear). 0 for any
 * other GTP-U message. */
static __always_inline __u32 n3_gtpu_ue_offset(void *data, __u32 tun)
{
	const struct gtpu_hdr *gtp = data + N3_GTP(tun);
	const __u8 *opt = data + N3_GTP_OPT(tun), *psc = data + N3_PSC(tun);

	if ((gtp->flags & 0xf0) != GTP_FLAGS_V1_PT || gtp->type != GTP_TPDU)
		return 0;
	if (!(gtp->flags & GTP_FLAGS_EXT_SEQ_PN))
		return N3_UE_PLAIN(tun);
	if ((gtp->flags & GTP_FLAGS_E) && opt[3] == GTP_EXT_PDU_SESSION && psc[0] == 1 && psc[3] == 0)
		return N3_UE_PSC(tun);
	return 0;
}

/* What the staged parser records of the last IP header it parses, at l3, beside its addresses:
 * the ports of its L4 header (protocol l4_proto at l4, starting with them), the outer layers (the
 * outer IPv4 at N3_IP with its L4 protocol outer_proto) and the last one. */
static __always_inline void n3_fill_l4(struct dpp_parse *p, void *data, const void *l3,
				       const void *l4, __u8 l4_proto, __u8 outer_proto)
{
	const __be16 *ports = l4; /* UDP, TCP and SCTP all start with them */

	p->key.sport = bpf_ntohs(ports[0]);
	p->key.dport = bpf_ntohs(ports[1]);
	p->layers.outer_l3 = N3_IP;
	p->layers.outer_l4 = N3_UDP;
	p->layers.outer_family = 4;
	p->layers.outer_proto = outer_proto;
	p->layers.l4_proto = l4_proto;
	p->layers.l3 = l3 - data;
}

/* What the staged parser makes of the last IPv4 header it parses, ip (an IPv4 header without
 * options whose L4 header starts with the ports), after the outer IPv4 at N3_IP with its L4
 * protocol outer_proto: the key's addresses and ports, the outer and last layers. The key is still
 * as the caller zeroed it: the addresses' other words are not written again. */
static __always_inline void n3_fill_ip(struct dpp_parse *p, void *data, const struct iphdr *ip,
				       __u8 outer_proto)
{
	key_set_ipv4_fields(&p->key, ip);
	n3_fill_l4(p, data, ip, ip + 1, ip->protocol, outer_proto);
}

/* The same of a UE IPv6 header without extension headers, ip6, inside the outer IPv4/UDP; false,
 * with *p zeroed again as the caller had it, when its N3_UE6_LEN bytes do not lie within the
 * frame. n3_ue checked that already, but clang tells the families apart again by the first byte,
 * kept in a stack slot: 6.1's verifier does not tie a spilled copy to the register compared (6.18's
 * does), so it walks an IPv4 UE header's path, checked for N3_UE_LEN bytes only, into these reads.
 * The check here is on the pointer read; no packet fails it that passed n3_ue. */
static __always_inline bool n3_fill_ip6(struct dpp_parse *p, void *data, void *end,
					const struct ipv6hdr *ip6)
{
	if ((void *)ip6 + N3_UE6_LEN > end) {
		__builtin_memset(p, 0, sizeof(*p));
		return false;
	}
	key_set_ipv6(&p->key, ip6);
	p->key.proto = ip6->nexthdr;
	n3_fill_l4(p, data, ip6, ip6 + 1, ip6->nexthdr, IPPROTO_UDP);
	return true;
}

/* The key and layers the staged parser would produce for the layout of tunnel tun, and the address
 * the tunnel's header goes to (n3_daddr, for the UPF). p is still as the caller zeroed it: only
 * what is not 0 is written. The UE header's part comes last: filled first, it cost an IPv4 UE
 * header 6 instructions more (clang's spills around the family's test). */
static __always_inline bool n3_fill(struct dpp_parse *p, void *data, void *end, __u32 tun,
				    const struct iphdr *ue, __u8 family, bool psc)
{
	const struct vxlan_hdr *vx = data + N3_VXLAN;
	const struct iphdr *tun_ip = data + tun;
	const struct gtpu_hdr *gtp = data + N3_GTP(tun);
	const __u8 *container = data + N3_PSC(tun);

	p->n3_daddr = tun_ip->daddr;
	p->key.flags = DPP_KEY_GTP;
	if (tun == N3_TUN_VXLAN) {
		p->key.vni = bpf_ntohl(vx->vni) >> 8;
		p->key.overlay = DPP_OVERLAY_VXLAN;
		p->key.flags |= DPP_KEY_VNI;
	}
	p->key.teid = bpf_ntohl(gtp->teid);
	if (psc) {
		p->key.flags |= DPP_KEY_GTP_QFI;
		if ((container[1] >> 4) == 1)
			p->key.flags |= DPP_KEY_GTP_UL;
		p->key.qfi = container[2] & 0x3f;
	}
	p->layers.tun_l3 = tun;
	p->layers.gtp = N3_GTP(tun);
	p->layers.ue_l3 = (void *)ue - data;
	if (family == 4) {
		n3_fill_ip(p, data, ue, IPPROTO_UDP);
		return true;
	}
	return n3_fill_ip6(p, data, end, (const struct ipv6hdr *)ue);
}

/* The GTP-U part of either layout, its tunnel at tun (the headers before it checked): true with *p
 * filled, or false. One bounds check covers the layout; which of its two lengths applies is known
 * once the GTP-U flags are read (within the shorter one); a UE IPv6 header takes one more. The
 * length fields then say whether the UE's whole L4 header is there: compares of numbers already
 * loaded, no further bounds check. */
static __always_inline bool n3_gtpu(void *data, void *end, __u32 tun, struct dpp_parse *p)
{
	__u32 ue_off, ue_end, l4_end;
	const struct iphdr *ue;
	__u8 family;

	if (data + N3_MIN_LEN(tun) > end)
		return false;
	ue_off = n3_gtpu_ue_offset(data, tun);
	if (!ue_off)
		return false;
	ue = data + ue_off;
	if ((void *)ue + N3_UE_LEN > end)
		return false;
	family = n3_ue(ue, end, ue_off, &l4_end, &ue_end);
	if (!family || !n3_lengths_ok(data, end - data, tun, ue_end, l4_end))
		return false;
	return n3_fill(p, data, end, tun, ue, family, ue_off == N3_UE_PSC(tun));
}

/* The whole fast path: true when the packet had one of the two layouts and *p now holds its key
 * and layers; false, with *p untouched, for the staged parser to start over. The outer Ethernet,
 * IPv4 and UDP headers are common to both; the UDP port tells which layout it may be. */
static __always_inline bool parse_n3(struct xdp_md *ctx, struct dpp_parse *p)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	const struct ethhdr *eth = data;
	const struct iphdr *ip = data + N3_IP;
	const struct udphdr *udp = data + N3_UDP;

	if (data + N3_MIN_LEN(N3_TUN_PLAIN) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    !n3_ipv4_ok(ip) || ip->protocol != IPPROTO_UDP)
		return false;
	if (udp->dest == bpf_htons(DPP_PORT_GTPU))
		return n3_gtpu(data, end, N3_TUN_PLAIN, p);
	if (udp->dest != bpf_htons(DPP_PORT_VXLAN) || data + N3_MIN_LEN(N3_TUN_VXLAN) > end ||
	    !n3_vxlan_ok(data))
		return false;
	return n3_gtpu(data, end, N3_TUN_VXLAN, p);
}

#endif /* DPP_CORE_N3_H */
