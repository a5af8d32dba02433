/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The route cache of forwarded packets: a next hop's answer (bpf_fib_lookup's, or a private
 * table's: nf/routing/lookup.h) for a destination kept in a per-CPU slot and reused while the
 * generation it was taken under is current (dpp_upf_routes). A FIB lookup costs about 110 ns; the
 * few destinations a UPF forwards to most (its gNBs, its N9 peers, the servers its UEs talk to)
 * then cost a slot compare. The control plane bumps the generation on any change of routes,
 * neighbours, links or routing rules, and of the private tables, and keeps it 0 (the cache off)
 * when nothing watches them or policy routing (which looks at more than the destination) is
 * configured. */
#ifndef DPP_NF_UPF_ROUTE_H
#define DPP_NF_UPF_ROUTE_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "nf/upf/maps.h"
#include "nf/routing/lookup.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

/* route_lookup's answer from the cache: a success (apart from bpf_fib_lookup's return codes). */
#define DPP_ROUTE_CACHE_HIT 0x100

_Static_assert((DPP_UPF_ROUTE_SLOTS & (DPP_UPF_ROUTE_SLOTS - 1)) == 0, "a power of two");

static __always_inline __u64 route_gen(void)
{
	__u32 zero = 0;
	const struct dpp_upf_route_gen *g = bpf_map_lookup_elem(&dpp_upf_route_gen, &zero);

	return g ? g->gen : 0;
}

/* The cache slot of a destination whose words xor to folded (Fibonacci hashing). */
static __always_inline __u32 route_hash(__u32 folded)
{
	return (folded * 0x9e3779b1u) & (DPP_UPF_ROUTE_SLOTS - 1);
}

/* The cache slot of a destination. */
static __always_inline __u32 route_slot(const __u32 *dst)
{
	return route_hash(dst[0] ^ dst[1] ^ dst[2] ^ dst[3]);
}

/* The slot holds dst of family, looked up in table for within (the ingress for the FIB, the
 * network instance for a private table) under gen. */
static __always_inline bool route_matches(const struct dpp_upf_route *r, __u64 gen, __u32 within,
					  __u8 table, __u8 family, const __u32 *dst)
{
	return r->gen == gen && r->within == within && r->table == table && r->family == family &&
	       r->dst[0] == dst[0] && r->dst[1] == dst[1] && r->dst[2] == dst[2] &&
	       r->dst[3] == dst[3];
}

/* The uncached answer: bpf_fib_lookup, or instance inst's private table. */
static __always_inline long route_answer(struct xdp_md *ctx, struct bpf_fib_lookup *fib, __u8 table,
					 __u32 inst)
{
	if (table == DPP_UPF_ROUTE_PRIVATE)
		return dpp_routing_private(inst, fib);
	return bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
}

/* The next hop of the packet fib describes, from this CPU's cache when it holds the destination
 * for the generation and the table (the FIB for the ingress, or instance inst's private table),
 * and, for the FIB, a packet at least this long went that way (the FIB does not tell the MTU it
 * checked). fib holds the lookup's parameters, zeroed first (an IPv4 destination is then the first
 * word of ipv6_dst, the others 0); on success, as bpf_fib_lookup leaves it: the egress in
 * fib->ifindex, both MACs, and DPP_ROUTE_CACHE_HIT when the cache answered. The destination and
 * what the answer is for are written into the slot before the lookup (which makes the destination
 * the gateway's) rather than kept on the stack across it, which the entry, the UPF inlined in it,
 * is short of: the slot is empty (gen 0) until the answer is in. */
static __always_inline long route_lookup(struct xdp_md *ctx, struct bpf_fib_lookup *fib, __u8 table,
					 __u32 inst)
{
	__u32 within = table == DPP_UPF_ROUTE_PRIVATE ? inst : fib->ifindex, slot;
	__u16 len = table == DPP_UPF_ROUTE_PRIVATE ? 0 : fib->tot_len;
	__u8 family = fib->family;
	__u64 gen = route_gen();
	struct dpp_upf_route *r;
	long rc;

	if (!gen)
		return route_answer(ctx, fib, table, inst);
	slot = route_slot(fib->ipv6_dst);
	r = bpf_map_lookup_elem(&dpp_upf_routes, &slot);
	if (!r)
		return route_answer(ctx, fib, table, inst);
	if (route_matches(r, gen, within, table, family, fib->ipv6_dst) && len <= r->max_len) {
		fib->ifindex = r->egress;
		__builtin_memcpy(fib->dmac, r->dmac, ETH_ALEN);
		__builtin_memcpy(fib->smac, r->smac, ETH_ALEN);
		return DPP_ROUTE_CACHE_HIT;
	}
	r->gen = 0;
	__builtin_memcpy(r->dst, fib->ipv6_dst, sizeof(r->dst));
	r->max_len = len; /* another destination, or a longer packet the same way */
	r->within = within;
	r->table = table;
	r->family = family;
	rc = route_answer(ctx, fib, table, inst);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return rc;
	r->egress = fib->ifindex;
	__builtin_memcpy(r->dmac, fib->dmac, ETH_ALEN);
	__builtin_memcpy(r->smac, fib->smac, ETH_ALEN);
	r->gen = gen;
	return rc;
}

#endif /* DPP_NF_UPF_ROUTE_H */
