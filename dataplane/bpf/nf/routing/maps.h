/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of the router's private tables (nf/routing/lookup.h): routes per network instance and
 * the neighbours their next hops resolved to. The control plane writes both
 * (netapp/routing/table.py, netapp/routing/neighbours.py). */
#ifndef DPP_NF_ROUTING_MAPS_H
#define DPP_NF_ROUTING_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/routing.h"

/* (instance, family, prefix) -> the next hop: the longest prefix of the instance's routes wins */
struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, DPP_MAX_ROUTES);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct dpp_route_key);
	__type(value, struct dpp_route);
} dpp_routes SEC(".maps");

/* (instance, family, next hop address) -> its MAC, the egress's MAC and the egress */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_NEIGHS);
	__type(key, struct dpp_neigh_key);
	__type(value, struct dpp_neigh);
} dpp_neighs SEC(".maps");

#endif /* DPP_NF_ROUTING_MAPS_H */
