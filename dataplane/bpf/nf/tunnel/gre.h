/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Into GRE: an IP packet behind Ethernet (addresses filled in by the output), an outer IPv4 or IPv6
 * header from the entry's local to its peer (protocol 47, built as the UPF's tunnels' are), and a GRE header (RFC 2784: no checksum; RFC 2890: the key when the
 * entry has one, no sequence number) whose protocol type is the carried packet's EtherType. The
 * frame is moved by the UPF's encapsulation (nf/upf/encap.h). */
#ifndef DPP_NF_TUNNEL_GRE_H
#define DPP_NF_TUNNEL_GRE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include "dpp/nf/tunnel.h"
#include "dpp/nf/upf.h"
#include "proto/overlay.h"
#include "nf/upf/decap.h"
#include "nf/upf/encap.h"

/* The GRE header with the key: the longest this builds. */
struct tunnel_gre_key {
	struct gre_base base;
	__be32 key;
};

#define TUNNEL_GRE4 (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct tunnel_gre_key))
#define TUNNEL_GRE6 (sizeof(struct ethhdr) + sizeof(struct ipv6hdr) + sizeof(struct tunnel_gre_key))

static __always_inline bool gre_keyed(const struct dpp_upf_pdr *t)
{
	return t->far == DPP_TUNNEL_GRE_KEY;
}

static __always_inline __u32 gre_len(const struct dpp_upf_pdr *t)
{
	return gre_keyed(t) ? sizeof(struct tunnel_gre_key) : sizeof(struct gre_base);
}

static __always_inline void fill_gre(struct tunnel_gre_key *gre, const struct dpp_upf_pdr *t,
				     __u8 family)
{
	gre->base.flags = gre_keyed(t) ? bpf_htons(GRE_F_KEY) : 0;
	gre->base.proto = ethertype_of(family);
	if (gre_keyed(t))
		gre->key = bpf_htonl(t->teid);
}

static __always_inline int gre4(struct xdp_md *ctx, const struct dpp_upf_pdr *t, __u32 len,
				__u8 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if (data + TUNNEL_GRE4 > end) /* also without the key: the packet is longer than a key */
		return -1;
	eth->h_proto = bpf_htons(ETH_P_IP);
	fill_outer4(ip, t, IPPROTO_GRE, gre_len(t) + len);
	fill_gre((void *)(ip + 1), t, family);
	return 0;
}

static __always_inline int gre6(struct xdp_md *ctx, const struct dpp_upf_pdr *t, __u32 len,
				__u8 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	if (data + TUNNEL_GRE6 > end)
		return -1;
	eth->h_proto = bpf_htons(ETH_P_IPV6);
	fill_outer6(ip6, t, IPPROTO_GRE, gre_len(t) + len);
	fill_gre((void *)(ip6 + 1), t, family);
	return 0;
}

/* Put the IP packet at l3 (family 4 or 6) into the entry's GRE tunnel. 0, or -1 when the packet
 * could not be made so (no headroom). */
static __always_inline int tunnel_gre(struct xdp_md *ctx, const struct dpp_upf_pdr *t, __u32 l3,
				      __u8 family)
{
	int ip = t->family == 6 ? sizeof(struct ipv6hdr) : sizeof(struct iphdr);
	__u32 len = upf_encap_room(ctx, l3, family, sizeof(struct ethhdr) + ip + gre_len(t));

	if (!len)
		return -1;
	return t->family == 6 ? gre6(ctx, t, len, family) : gre4(ctx, t, len, family);
}

#endif /* DPP_NF_TUNNEL_GRE_H */
