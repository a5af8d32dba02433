/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of the router's private tables (bpf/nf/routing/): the routes the control plane writes per
 * network instance (an LPM trie) and the neighbours their next hops resolved to, the path a
 * forwarded packet's next hop came from, and the router's reasons. Mirrored in
 * netapp/routing/abi.py, checked against BTF like the core's. */
#ifndef DPP_NF_ROUTING_H
#define DPP_NF_ROUTING_H

#include <linux/types.h>

/* Map sizes: routes of every private instance together (dpp_routes, an LPM trie: not
 * preallocated), resolved next hops (dpp_neighs). */
#ifndef DPP_MAX_ROUTES
#define DPP_MAX_ROUTES 1048576
#endif
#ifndef DPP_MAX_NEIGHS
#define DPP_MAX_NEIGHS 65536
#endif

/* struct dpp_route_key.prefixlen of a route of prefix length n: n + this (the instance and the
 * family are matched whole, ahead of the address). */
#define DPP_ROUTE_KEY_PREFIX 64

/* enum dpp_route_path: where a forwarded packet's next hop came from (the trace's route_path). */
enum dpp_route_path {
	DPP_ROUTE_PATH_NONE = 0,	   /* not routed (not forwarded, or TX/PASS outputs) */
	DPP_ROUTE_PATH_FIB = 1,		   /* bpf_fib_lookup */
	DPP_ROUTE_PATH_FIB_CACHED = 2,	   /* the route cache's copy of a FIB answer */
	DPP_ROUTE_PATH_PRIVATE = 3,	   /* the instance's table (dpp_routes, dpp_neighs) */
	DPP_ROUTE_PATH_PRIVATE_CACHED = 4, /* the route cache's copy of a private answer */
	DPP_ROUTE_PATH_UNRESOLVED = 5,	   /* a route, its next hop not resolved: to the kernel */
	DPP_ROUTE_PATH_NO_ROUTE = 6,	   /* no route */
};

/* enum dpp_route_flags: struct dpp_route.flags bits. */
enum dpp_route_flags {
	DPP_ROUTE_ONLINK = 1, /* no gateway: the destination itself is the neighbour */
};

/* Key of dpp_routes (BPF_MAP_TYPE_LPM_TRIE): a prefix of a family's addresses in a network
 * instance. prefixlen counts the bits after it: DPP_ROUTE_KEY_PREFIX + the prefix's length. */
struct dpp_route_key {
	__u32 prefixlen;
	__u32 net_instance; /* matched whole: an instance's routes never serve another's packets */
	__u32 family;	    /* 4 or 6, matched whole */
	__u32 addr[4];	    /* network order; IPv4 in addr[0] */
};

/* Value of dpp_routes: the next hop. */
struct dpp_route {
	__u32 gateway[4]; /* network order (IPv4 in gateway[0]); unused with DPP_ROUTE_ONLINK */
	__u32 ifindex;	  /* the egress */
	__u32 flags;	  /* enum dpp_route_flags */
};

/* Key of dpp_neighs: a next hop of a network instance's routes (a gateway, or an on-link
 * destination). */
struct dpp_neigh_key {
	__u32 net_instance;
	__u32 family;  /* 4 or 6 */
	__u32 addr[4]; /* network order; IPv4 in addr[0] */
};

/* Value of dpp_neighs: the next hop resolved (copied from the kernel's neighbour table by
 * netapp/routing/neighbours.py). */
struct dpp_neigh {
	__u8 dmac[6]; /* the next hop's */
	__u8 smac[6]; /* the egress's */
	__u32 ifindex; /* the egress it was resolved on */
};

/* The router's reasons, from DPP_REASON_BASE_ROUTING (dpp/core/consts.h). */
#define DPP_ROUTING_REASONS(X)                                                                   \
	X(ROUTING, ROUTING_NO_ROUTE, routing_no_route, 0) /* no route: dropped */                \
	X(ROUTING, ROUTING_NO_NEIGH, routing_no_neigh, 1) /* next hop unresolved: to the kernel */

#endif /* DPP_NF_ROUTING_H */
