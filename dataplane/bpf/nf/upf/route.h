/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The route cache of forwarded packets: bpf_fib_lookup's answer for a destination kept in a per-CPU
 * slot and reused while the generation it was taken under is current (dpp_upf_routes). A FIB lookup
 * costs about 110 ns; the few destinations a UPF forwards to most (its gNBs, its N9 peers, the
 * servers its UEs talk to) then cost a slot compare. The control plane bumps the generation on any
 * change of routes, neighbours, links or routing rules, and keeps it 0 (the cache off) when nothing
 * watches them or policy routing (which looks at more than the destination) is configured. */
#ifndef DPP_NF_UPF_ROUTE_H
#define DPP_NF_UPF_ROUTE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "nf/upf/maps.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

_Static_assert((DPP_UPF_ROUTE_SLOTS & (DPP_UPF_ROUTE_SLOTS - 1)) == 0, "a power of two");

static __always_inline __u64 route_gen(void)
{
	__u32 zero = 0;
	const struct dpp_upf_route_gen *g = bpf_map_lookup_elem(&dpp_upf_route_gen, &zero);

	return g ? g->gen : 0;
}

/* The cache slot of a destination (Fibonacci hashing of its words). */
static __always_inline __u32 route_slot(const __u32 *dst)
{
	return ((dst[0] ^ dst[1] ^ dst[2] ^ dst[3]) * 0x9e3779b1u) & (DPP_UPF_ROUTE_SLOTS - 1);
}

/* The slot holds dst of family, looked up for ingress under gen. */
static __always_inline bool route_matches(const struct dpp_upf_route *r, __u64 gen, __u32 ingress,
					  __u8 family, const __u32 *dst)
{
	return r->gen == gen && r->ingress == ingress && r->family == family && r->dst[0] == dst[0] &&
	       r->dst[1] == dst[1] && r->dst[2] == dst[2] && r->dst[3] == dst[3];
}

/* bpf_fib_lookup, from this CPU's cache when it holds the destination for the generation and the
 * ingress, and a packet at least this long went that way (the FIB does not tell the MTU it
 * checked). fib holds the lookup's parameters; on success, as bpf_fib_lookup leaves it: the
 * egress in fib->ifindex, both MACs. */
static __always_inline long route_lookup(struct xdp_md *ctx, struct bpf_fib_lookup *fib)
{
	__u32 dst[4] = { fib->ipv4_dst }, ingress = fib->ifindex, slot;
	__u8 family = fib->family;
	__u16 len = fib->tot_len;
	__u64 gen = route_gen();
	struct dpp_upf_route *r;
	long rc;

	if (!gen)
		return bpf_fib_lookup(ctx, fib, sizeof(*fib), 0);
	if (family != AF_INET)
		__builtin_memcpy(dst, fib->ipv6_dst, sizeof(dst));
	slot = route_slot(dst);
	r = bpf_map_lookup_elem(&dpp_upf_routes, &slot);
	if (r && route_matches(r, gen, ingress, family, dst) && len <= r->max_len) {
		fib->ifindex = r->egress;
		__builtin_memcpy(fib->dmac, r->dmac, ETH_ALEN);
		__builtin_memcpy(fib->smac, r->smac, ETH_ALEN);
		return BPF_FIB_LKUP_RET_SUCCESS;
	}
	rc = bpf_fib_lookup(ctx, fib, sizeof(*fib), 0); /* fib's destination becomes the gateway */
	if (rc != BPF_FIB_LKUP_RET_SUCCESS || !r)
		return rc;
	if (!route_matches(r, gen, ingress, family, dst) || len > r->max_len)
		r->max_len = len; /* a new entry, or a longer packet the same way */
	r->gen = gen;
	__builtin_memcpy(r->dst, dst, sizeof(dst));
	r->ingress = ingress;
	r->family = family;
	r->egress = fib->ifindex;
	__builtin_memcpy(r->dmac, fib->dmac, ETH_ALEN);
	__builtin_memcpy(r->smac, fib->smac, ETH_ALEN);
	return rc;
}

#endif /* DPP_NF_UPF_ROUTE_H */
