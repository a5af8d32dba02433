// SPDX-License-Identifier: GPL-2.0-only
/* The next-hop lookups of forwarded packets (nf/routing/lookup.h, nf/upf/route.h) alone, for the
 * benchmark (bench/routing): every frame's destination is looked up as its test header says.
 *
 *   Ethernet (14 bytes, any type) / struct route_test_hdr
 *
 * Each program returns XDP_PASS when its lookup answered as the benchmark's case expects and
 * XDP_DROP otherwise (a miss where a hit was meant stops the benchmark); xdp_route_skip reads the
 * same header and fills the same lookup parameters, no lookup: the path without it. */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/upf/route.h"

#define ETH_LEN 14

struct route_test_hdr {
	__be32 dst;	    /* the destination, network order (the benchmark's walk writes it) */
	__u32 net_instance; /* the private table's instance */
};

/* The lookup's parameters from the frame's header, as the UPF's output fills them; false for a
 * frame too short. */
static __always_inline bool route_params(struct xdp_md *ctx, struct bpf_fib_lookup *fib,
					 __u32 *inst)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct route_test_hdr *hdr = data + ETH_LEN;

	if ((void *)(hdr + 1) > end)
		return false;
	fib->family = AF_INET;
	fib->ifindex = ctx->ingress_ifindex;
	fib->tot_len = end - data - ETH_LEN;
	fib->ipv4_dst = hdr->dst;
	*inst = hdr->net_instance;
	return true;
}

/* The cases: no lookup (passes); the private table uncached (the instance's longest route and its
 * neighbour); bpf_fib_lookup uncached (the namespace's routes and neighbours answer); the route
 * cache (dpp_upf_route_gen set) holding a private or a FIB answer (passes on a hit only). */
enum route_case {
	ROUTE_SKIP,
	ROUTE_PRIVATE,
	ROUTE_FIB,
	ROUTE_PRIVATE_CACHED,
	ROUTE_FIB_CACHED,
};

static __always_inline int route_case(struct xdp_md *ctx, enum route_case c)
{
	struct bpf_fib_lookup fib = {};
	long rc = -1, wanted = BPF_FIB_LKUP_RET_SUCCESS;
	__u32 inst;

	if (!route_params(ctx, &fib, &inst))
		return XDP_ABORTED;
	switch (c) {
	case ROUTE_SKIP:
		return fib.ipv4_dst && inst ? XDP_PASS : XDP_DROP;
	case ROUTE_PRIVATE:
		rc = dpp_routing_private(inst, &fib);
		break;
	case ROUTE_FIB:
		rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
		break;
	case ROUTE_PRIVATE_CACHED:
		rc = route_lookup(ctx, &fib, DPP_UPF_ROUTE_PRIVATE, inst);
		wanted = DPP_ROUTE_CACHE_HIT;
		break;
	case ROUTE_FIB_CACHED:
		rc = route_lookup(ctx, &fib, DPP_UPF_ROUTE_FIB, 0);
		wanted = DPP_ROUTE_CACHE_HIT;
		break;
	}
	return rc == wanted ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdp_route_skip(struct xdp_md *ctx) { return route_case(ctx, ROUTE_SKIP); }
SEC("xdp")
int xdp_route_private(struct xdp_md *ctx) { return route_case(ctx, ROUTE_PRIVATE); }
SEC("xdp")
int xdp_route_fib(struct xdp_md *ctx) { return route_case(ctx, ROUTE_FIB); }
SEC("xdp")
int xdp_route_private_cached(struct xdp_md *ctx) { return route_case(ctx, ROUTE_PRIVATE_CACHED); }
SEC("xdp")
int xdp_route_fib_cached(struct xdp_md *ctx) { return route_case(ctx, ROUTE_FIB_CACHED); }

char LICENSE[] SEC("license") = "GPL";
