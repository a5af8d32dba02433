/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The private routing table's lookup: a network instance's longest matching route (dpp_routes),
 * then its next hop's neighbour entry (dpp_neighs). Answers as bpf_fib_lookup does (its return
 * codes, the egress and both MACs in struct bpf_fib_lookup), so that a forwarded packet's output
 * (and the route cache, nf/upf/route.h) takes either answer alike. A private instance never falls
 * back to the host's FIB: no route is no route. */
#ifndef DPP_NF_ROUTING_LOOKUP_H
#define DPP_NF_ROUTING_LOOKUP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "nf/routing/maps.h"

#ifndef AF_INET
#define AF_INET 2
#endif

/* The next hop of fib's destination (family AF_INET or AF_INET6) in instance inst:
 * BPF_FIB_LKUP_RET_SUCCESS with fib's ifindex and MACs, BPF_FIB_LKUP_RET_NO_NEIGH (a route, its
 * next hop unresolved) or BPF_FIB_LKUP_RET_NOT_FWDED (no route). A global function, verified once:
 * its keys stay off the stack of the packet's path, which is short of it. */
__attribute__((noinline)) long dpp_routing_private(__u32 inst, struct bpf_fib_lookup *fib)
{
	/* one key after the other in the same bytes */
	union {
		struct dpp_route_key route;
		struct dpp_neigh_key neigh;
	} k = { .route = { .net_instance = inst } };
	const struct dpp_route *route;
	const struct dpp_neigh *neigh;
	__u32 family;

	if (!fib)
		return BPF_FIB_LKUP_RET_NOT_FWDED;
	family = fib->family == AF_INET ? 4 : 6;
	k.route.prefixlen = DPP_ROUTE_KEY_PREFIX + (family == 4 ? 32 : 128);
	k.route.family = family;
	if (family == 4)
		k.route.addr[0] = fib->ipv4_dst;
	else
		__builtin_memcpy(k.route.addr, fib->ipv6_dst, sizeof(k.route.addr));
	route = bpf_map_lookup_elem(&dpp_routes, &k.route);
	if (!route)
		return BPF_FIB_LKUP_RET_NOT_FWDED;
	/* read before net_instance overwrites it: nothing is kept across the lookup */
	k.neigh.family = k.route.family;
	k.neigh.net_instance = inst;
	if (!(route->flags & DPP_ROUTE_ONLINK))
		__builtin_memcpy(k.neigh.addr, route->gateway, sizeof(k.neigh.addr));
	else if (k.neigh.family == 4)
		__builtin_memcpy(k.neigh.addr, (__u32[4]){ fib->ipv4_dst }, sizeof(k.neigh.addr));
	else
		__builtin_memcpy(k.neigh.addr, fib->ipv6_dst, sizeof(k.neigh.addr));
	neigh = bpf_map_lookup_elem(&dpp_neighs, &k.neigh);
	if (!neigh)
		return BPF_FIB_LKUP_RET_NO_NEIGH;
	fib->ifindex = neigh->ifindex;
	__builtin_memcpy(fib->dmac, neigh->dmac, ETH_ALEN);
	__builtin_memcpy(fib->smac, neigh->smac, ETH_ALEN);
	return BPF_FIB_LKUP_RET_SUCCESS;
}

#endif /* DPP_NF_ROUTING_LOOKUP_H */
