/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Where a forwarded packet goes, as its PDR's output says (enum dpp_upf_output): routed by the
 * kernel's FIB and neighbour tables or by its network instance's private table, back out of the
 * ingress (XDP_TX), out of a port (DEVMAP), or to the kernel's stack. A next hop the FIB cannot
 * give passes the packet to the kernel, counted: the kernel resolves the neighbour and the next
 * packet takes the fast way. A private table's unresolved next hop does the same (user space
 * copies the kernel's answer into dpp_neighs); its packet without a route is dropped, counted. */
#ifndef DPP_NF_UPF_OUTPUT_H
#define DPP_NF_UPF_OUTPUT_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "core/outcome.h"
#include "nf/redirect/maps.h"
#include "proto/eth.h"
#include "nf/upf/route.h"

static __always_inline void swap_macs(struct ethhdr *eth)
{
	__u8 mac[ETH_ALEN];

	__builtin_memcpy(mac, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, mac, ETH_ALEN);
}

/* The next hop (through the route cache) of the IP packet right after the Ethernet header, from
 * the FIB or (table DPP_UPF_ROUTE_PRIVATE) instance inst's private table; fib->ifindex is the
 * egress. */
static __always_inline long next_hop(struct xdp_md *ctx, struct bpf_fib_lookup *fib, __u8 table,
				     __u32 inst)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	fib->ifindex = ctx->ingress_ifindex;
	if ((void *)(eth + 1) > end)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		if ((void *)(ip + 1) > end)
			return -1;
		fib->family = AF_INET;
		fib->tos = ip->tos;
		fib->l4_protocol = ip->protocol;
		fib->tot_len = bpf_ntohs(ip->tot_len);
		fib->ipv4_src = ip->saddr;
		fib->ipv4_dst = ip->daddr;
	} else {
		if ((void *)(ip6 + 1) > end)
			return -1;
		fib->family = AF_INET6;
		fib->l4_protocol = ip6->nexthdr;
		fib->tot_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
		__builtin_memcpy(fib->ipv6_src, &ip6->saddr, sizeof(fib->ipv6_src));
		__builtin_memcpy(fib->ipv6_dst, &ip6->daddr, sizeof(fib->ipv6_dst));
	}
	return route_lookup(ctx, fib, table, inst);
}

/* enum dpp_route_path of a lookup's answer (route_lookup's return). */
static __always_inline __u32 route_path(long rc, bool private)
{
	if (rc == DPP_ROUTE_CACHE_HIT)
		return private ? DPP_ROUTE_PATH_PRIVATE_CACHED : DPP_ROUTE_PATH_FIB_CACHED;
	if (rc == BPF_FIB_LKUP_RET_SUCCESS)
		return private ? DPP_ROUTE_PATH_PRIVATE : DPP_ROUTE_PATH_FIB;
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return DPP_ROUTE_PATH_UNRESOLVED;
	return DPP_ROUTE_PATH_NO_ROUTE;
}

/* The verdict and reason of a packet without a next hop: the kernel resolves a neighbour; a private
 * instance has no other route (isolation), so its packet without one is dropped. */
static __always_inline int no_next_hop(long rc, bool private, struct dpp_outcome *o)
{
	if (!private) {
		o->reason = rc == BPF_FIB_LKUP_RET_NO_NEIGH ? DPP_REASON_UPF_NO_NEIGH :
							      DPP_REASON_UPF_NO_ROUTE;
		return XDP_PASS;
	}
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH) {
		o->reason = DPP_REASON_ROUTING_NO_NEIGH;
		return XDP_PASS;
	}
	o->reason = DPP_REASON_ROUTING_NO_ROUTE;
	return XDP_DROP;
}

/* The next hop's MACs into the frame; false when it has no Ethernet header. */
static __always_inline bool set_next_hop_macs(struct xdp_md *ctx, const struct bpf_fib_lookup *fib)
{
	struct ethhdr *eth = (void *)(long)ctx->data;

	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return false;
	eth_set_addrs(eth, fib->dmac, fib->smac);
	return true;
}

/* Out of the next hop's egress (XDP_TX when that is the ingress), its MACs in the frame. */
static __always_inline int next_hop_out(struct xdp_md *ctx, const struct bpf_fib_lookup *fib,
					struct dpp_outcome *o)
{
	o->egress_ifindex = fib->ifindex;
	if (fib->ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect(fib->ifindex, 0);
}

/* This CPU's room for a next hop lookup, zeroed (route_lookup's contract), or NULL. Zeroed a
 * 64-bit word at a time (a map value is 8-byte aligned): memset of the struct, 4-byte aligned,
 * compiles to 16 stores. */
static __always_inline struct bpf_fib_lookup *next_hop_room(void)
{
	__u32 zero = 0, i;
	__u64 *words = bpf_map_lookup_elem(&dpp_upf_next_hop_room, &zero);

	if (!words)
		return NULL;
#pragma unroll
	for (i = 0; i < sizeof(struct bpf_fib_lookup) / sizeof(*words); i++)
		words[i] = 0;
	return (struct bpf_fib_lookup *)words;
}

/* Routed: the next hop's MACs, then out of its egress (XDP_TX when that is the ingress) or of the
 * PDR's port. No route or no neighbour: as no_next_hop says, counted. */
static __always_inline int upf_route(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
				     struct dpp_outcome *o)
{
	bool private = pdr->output == DPP_UPF_OUTPUT_PRIVATE;
	struct bpf_fib_lookup *fib = next_hop_room();
	long rc;

	if (!fib)
		return XDP_ABORTED;
	rc = next_hop(ctx, fib, private ? DPP_UPF_ROUTE_PRIVATE : DPP_UPF_ROUTE_FIB, pdr->ifindex);
	o->route_path = route_path(rc, private);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != DPP_ROUTE_CACHE_HIT)
		return no_next_hop(rc, private, o);
	if (!set_next_hop_macs(ctx, fib))
		return XDP_ABORTED;
	if (pdr->output == DPP_UPF_OUTPUT_REDIRECT) {
		o->egress_ifindex = pdr->ifindex;
		if (bpf_redirect_map(&dpp_ports, pdr->ifindex, 0) == XDP_REDIRECT)
			return XDP_REDIRECT;
		o->reason = DPP_REASON_PORT_UNAVAILABLE;
		return XDP_PASS;
	}
	return next_hop_out(ctx, fib, o);
}

/* The verdict of a packet made ready to go (Ethernet first). */
static __always_inline int upf_output(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
				      struct dpp_outcome *o)
{
	struct ethhdr *eth = (void *)(long)ctx->data;

	switch (pdr->output) {
	case DPP_UPF_OUTPUT_PASS:
		return XDP_PASS;
	case DPP_UPF_OUTPUT_TX:
		if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
			return XDP_ABORTED;
		swap_macs(eth);
		return XDP_TX;
	}
	return upf_route(ctx, pdr, o);
}

#endif /* DPP_NF_UPF_OUTPUT_H */
