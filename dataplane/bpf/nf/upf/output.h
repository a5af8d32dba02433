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

/* The frame's MACs set to dmac and smac; false when it has no Ethernet header. */
static __always_inline bool set_frame_macs(struct xdp_md *ctx, const __u8 *dmac, const __u8 *smac)
{
	struct ethhdr *eth = (void *)(long)ctx->data;

	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return false;
	eth_set_addrs(eth, dmac, smac);
	return true;
}

/* The next hop's MACs into the frame; false when it has no Ethernet header. */
static __always_inline bool set_next_hop_macs(struct xdp_md *ctx, const struct bpf_fib_lookup *fib)
{
	return set_frame_macs(ctx, fib->dmac, fib->smac);
}

/* Out of egress, the next hop's (XDP_TX when that is the ingress). */
static __always_inline int egress_out(struct xdp_md *ctx, __u32 egress, struct dpp_outcome *o)
{
	o->egress_ifindex = egress;
	if (egress == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect(egress, 0);
}

/* Out of the next hop's egress (XDP_TX when that is the ingress), its MACs in the frame. */
static __always_inline int next_hop_out(struct xdp_md *ctx, const struct bpf_fib_lookup *fib,
					struct dpp_outcome *o)
{
	return egress_out(ctx, fib->ifindex, o);
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

/* Out of the next hop's egress, or of the PDR's port (its MACs in the frame already). */
static __always_inline int upf_routed_out(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
					  __u32 egress, struct dpp_outcome *o)
{
	if (pdr->output == DPP_UPF_OUTPUT_REDIRECT) {
		o->egress_ifindex = pdr->ifindex;
		if (bpf_redirect_map(&dpp_ports, pdr->ifindex, 0) == XDP_REDIRECT)
			return XDP_REDIRECT;
		o->reason = DPP_REASON_PORT_UNAVAILABLE;
		return XDP_PASS;
	}
	return egress_out(ctx, egress, o);
}

/* The IP header after the frame's Ethernet header, whole within the frame (IPv6 when not IPv4, as
 * next_hop reads it), its family in *family; NULL when it is not all there. */
static __always_inline void *frame_l3(struct xdp_md *ctx, __u8 *family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct ipv6hdr *ip6 = (void *)(eth + 1);

	if ((void *)(eth + 1) > end)
		return NULL;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		*family = AF_INET;
		return (void *)(ip + 1) <= end ? ip : NULL;
	}
	*family = AF_INET6;
	return (void *)(ip6 + 1) <= end ? ip6 : NULL;
}

/* The route cache's slot of the destination of the IP header at l3 (route_slot's, an IPv4
 * address the first word and the others 0). */
static __always_inline __u32 l3_route_slot(const void *l3, __u8 family)
{
	const struct iphdr *ip = l3;
	const __u32 *dst6 = ((const struct ipv6hdr *)l3)->daddr.in6_u.u6_addr32;

	if (family == AF_INET)
		return route_hash(ip->daddr);
	return route_hash(dst6[0] ^ dst6[1] ^ dst6[2] ^ dst6[3]);
}

/* Slot r holds the next hop of the IP header at l3 (route_matches but for the generation, the
 * destination read from the packet) and, for the FIB, a packet this long went that way. */
static __always_inline bool l3_route_holds(const struct dpp_upf_route *r, const void *l3,
					   __u8 family, __u8 table, __u32 within)
{
	const struct iphdr *ip = l3;
	const struct ipv6hdr *ip6 = l3;
	const __u32 *dst6 = ip6->daddr.in6_u.u6_addr32;
	__u16 len;

	if (r->within != within || r->table != table || r->family != family)
		return false;
	if (family == AF_INET) {
		if (r->dst[0] != ip->daddr || r->dst[1] || r->dst[2] || r->dst[3])
			return false;
		len = bpf_ntohs(ip->tot_len);
	} else {
		if (r->dst[0] != dst6[0] || r->dst[1] != dst6[1] || r->dst[2] != dst6[2] ||
		    r->dst[3] != dst6[3])
			return false;
		len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	}
	return table == DPP_UPF_ROUTE_PRIVATE || len <= r->max_len;
}

/* The slot of this CPU's route cache that holds the next hop of the frame's IP packet for the
 * PDR's table (route_lookup's hit, read from the packet), or NULL: a miss, the cache off, the
 * headers not all there. The packet's header and the PDR are read again after the slot's lookup:
 * only pointers the caller keeps anyway live across it, where a key kept in registers would be
 * spilled to the entry's stack, which has no room for it. */
static __always_inline const struct dpp_upf_route *upf_route_cached(struct xdp_md *ctx,
								   const struct dpp_upf_pdr *pdr)
{
	__u32 zero = 0, slot, within;
	const struct dpp_upf_route_gen *g = bpf_map_lookup_elem(&dpp_upf_route_gen, &zero);
	const struct dpp_upf_route *r;
	bool private;
	__u8 family;
	void *l3;

	if (!g || !g->gen)
		return NULL;
	l3 = frame_l3(ctx, &family);
	if (!l3)
		return NULL;
	slot = l3_route_slot(l3, family);
	r = bpf_map_lookup_elem(&dpp_upf_routes, &slot);
	if (!r || r->gen != g->gen)
		return NULL;
	l3 = frame_l3(ctx, &family);
	if (!l3)
		return NULL;
	private = pdr->output == DPP_UPF_OUTPUT_PRIVATE;
	within = ctx->ingress_ifindex;
	/* read apart: a load through a pointer chosen between the context and pdr would not verify */
	barrier_var(within);
	if (private)
		within = pdr->ifindex;
	return l3_route_holds(r, l3, family, private ? DPP_UPF_ROUTE_PRIVATE : DPP_UPF_ROUTE_FIB,
			      within) ? r : NULL;
}

/* A routed packet whose next hop the route cache did not hold (or the cache off): this CPU's room
 * filled from the packet and the next hop asked for (route_lookup, which looks at the slot again),
 * then as upf_route. No route or no neighbour: as no_next_hop says, counted. */
static __always_inline int upf_route_asked(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
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
	return upf_routed_out(ctx, pdr, fib->ifindex, o);
}

/* Routed: the next hop's MACs, then out of its egress (XDP_TX when that is the ingress) or of the
 * PDR's port. A destination the route cache holds goes from its slot into the frame: no room to
 * zero and fill, no answer copied twice; any other through upf_route_asked. */
static __always_inline int upf_route(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
				     struct dpp_outcome *o)
{
	const struct dpp_upf_route *r = upf_route_cached(ctx, pdr);

	if (!r)
		return upf_route_asked(ctx, pdr, o);
	o->route_path = route_path(DPP_ROUTE_CACHE_HIT, pdr->output == DPP_UPF_OUTPUT_PRIVATE);
	if (!set_frame_macs(ctx, r->dmac, r->smac))
		return XDP_ABORTED;
	return upf_routed_out(ctx, pdr, r->egress, o);
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
