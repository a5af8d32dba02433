/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* TUNNEL: a rule's packet leaves its GTP-U tunnel (decapsulated) or is put into another one
 * (re-tunnelled into GTP-U, or carried in GRE), then goes out of a port or towards an address
 * through the router, as the rule's entry of dpp_tunnels says (dpp/nf/tunnel.h). The headers are
 * removed and built by the UPF's code (nf/upf/decap.h, nf/upf/encap.h; GRE's by nf/tunnel/gre.h
 * over the latter), the next hop found by its route cache over bpf_fib_lookup (nf/upf/route.h). */
#ifndef DPP_NF_TUNNEL_TUNNEL_H
#define DPP_NF_TUNNEL_TUNNEL_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include "core/maps.h"
#include "core/outcome.h"
#include "nf/tunnel/gre.h"
#include "nf/tunnel/maps.h"
#include "nf/upf/decap.h"
#include "nf/upf/encap.h"
#include "nf/upf/output.h"

/* The packet arrived as a GTP-U T-PDU whose UE packet the parser found. */
static __always_inline bool tunnelled(const struct dpp_flow_key *key, const struct dpp_layers *l)
{
	return (key->flags & DPP_KEY_GTP) && l->ue_l3 && key->family;
}

/* The IP packet a GRE tunnel carries: a GTP-U packet's UE packet, or the innermost IP packet of
 * one without GTP-U. 0 when there is none (a T-PDU of another kind, or no IP at all). */
static __always_inline __u32 carried_l3(const struct dpp_flow_key *key, const struct dpp_layers *l)
{
	if (key->flags & DPP_KEY_GTP)
		return tunnelled(key, l) ? l->ue_l3 : 0;
	return key->family ? l->l3 : 0;
}

/* The new tunnel's source when the entry gives none: where the packet's own tunnel was sent (the
 * IP header carrying its GTP-U), if of the peer's family. 0, or -1 when there is none (a packet
 * without GTP-U has no tunnel of its own). */
static __always_inline int tunnel_source(struct xdp_md *ctx, const struct dpp_flow_key *key,
					 const struct dpp_layers *l, struct dpp_upf_pdr *e)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	void *ip = data + bounded_offset(l->tun_l3);
	struct ipv6hdr *ip6 = ip;
	struct iphdr *ip4 = ip;

	if (e->local[0] | e->local[1] | e->local[2] | e->local[3])
		return 0;
	if (!tunnelled(key, l) || (void *)(ip4 + 1) > end)
		return -1;
	if (ip4->version == 4 && e->family == 4) {
		e->local[0] = ip4->daddr;
		return 0;
	}
	if (ip4->version != 6 || e->family != 6 || (void *)(ip6 + 1) > end)
		return -1;
	__builtin_memcpy(e->local, &ip6->daddr, sizeof(e->local));
	return 0;
}

static __always_inline bool into_gtpu(const struct dpp_upf_pdr *t)
{
	return t->far == DPP_TUNNEL_GTPU;
}

/* What a GTP-U packet keeps in its new GTP-U tunnel: its TEID, and its PDU Session Container's QFI
 * and direction (PDU type) if it had one, no container if it had none. */
static __always_inline void keep_gtpu(struct dpp_upf_pdr *e, const struct dpp_flow_key *key)
{
	e->flags &= ~DPP_UPF_PDR_UDP;
	e->teid = key->teid;
	e->qfi = key->qfi;
	e->pdu_type = (key->flags & DPP_KEY_GTP_UL) ? 1 : 0;
	if (!(key->flags & DPP_KEY_GTP_QFI))
		e->pdu_type = DPP_UPF_PDU_NO_CONTAINER;
}

/* This CPU's copy of a re-tunnelling entry, made for the packet: into GTP-U, what the packet keeps
 * (keep_gtpu); either way the source if the entry gives none. NULL, the packet unchanged and
 * *reason set, when it cannot be re-tunnelled. */
static __always_inline struct dpp_upf_pdr *tunnel_prepare(struct xdp_md *ctx,
							  const struct dpp_flow_key *key,
							  const struct dpp_layers *l,
							  const struct dpp_upf_pdr *t, int *reason)
{
	struct dpp_upf_pdr *e;
	__u32 zero = 0;

	*reason = into_gtpu(t) ? DPP_REASON_TUNNEL_NOT_GTPU : DPP_REASON_TUNNEL_NOT_IP;
	if (into_gtpu(t) ? !tunnelled(key, l) : !carried_l3(key, l))
		return NULL;
	*reason = DPP_REASON_TUNNEL_FAILED;
	e = bpf_map_lookup_elem(&dpp_tunnel_scratch, &zero);
	if (!e)
		return NULL;
	__builtin_memcpy(e, t, sizeof(*e));
	if (into_gtpu(t))
		keep_gtpu(e, key);
	*reason = DPP_REASON_TUNNEL_NO_SOURCE;
	return tunnel_source(ctx, key, l, e) ? NULL : e;
}

/* Into the prepared entry's tunnel. 0, or -1 when the packet could not be made so. */
static __always_inline int tunnel_encap(struct xdp_md *ctx, const struct dpp_flow_key *key,
					const struct dpp_layers *l, const struct dpp_upf_pdr *e)
{
	if (into_gtpu(e))
		return upf_encap(ctx, e, l->ue_l3, key->family);
	return tunnel_gre(ctx, e, carried_l3(key, l), key->family);
}

/* The next hop towards the entry's peer (not the packet's own destination: an IP interface's
 * address, or the new tunnel's far end), from the route cache or the FIB. */
static __always_inline long tunnel_next_hop(struct xdp_md *ctx, struct bpf_fib_lookup *fib,
					    const struct dpp_upf_pdr *t)
{
	fib->ifindex = ctx->ingress_ifindex;
	fib->family = t->family == 6 ? AF_INET6 : AF_INET;
	fib->tot_len = (ctx->data_end - ctx->data) - sizeof(struct ethhdr);
	__builtin_memcpy(fib->ipv6_dst, t->peer, sizeof(fib->ipv6_dst));
	return route_lookup(ctx, fib, DPP_UPF_ROUTE_FIB, 0);
}

/* Towards the entry's peer through the router; without a next hop as the UPF's routed packets. */
static __always_inline int tunnel_route(struct xdp_md *ctx, const struct dpp_upf_pdr *t,
					struct dpp_outcome *o)
{
	struct bpf_fib_lookup *fib = next_hop_room();
	long rc;

	if (!fib)
		return XDP_ABORTED;
	rc = tunnel_next_hop(ctx, fib, t);
	o->route_path = route_path(rc, false);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != DPP_ROUTE_CACHE_HIT)
		return no_next_hop(rc, false, o);
	if (!set_next_hop_macs(ctx, fib))
		return XDP_ABORTED;
	return next_hop_out(ctx, fib, o);
}

/* A failure after the packet may have changed: dropped, counted (nothing else could send it). */
static __always_inline int tunnel_failed(struct dpp_outcome *o, int reason)
{
	o->reason = reason;
	return XDP_DROP;
}

/* The TUNNEL stage of the rule whose arg is `arg` (a global function: verified once). Whatever can
 * refuse the packet (its port, its tunnel, a source) is settled before the packet changes, so a
 * refused one is intact for the default verdict. */
__attribute__((noinline)) int dpp_tunnel(struct xdp_md *ctx, const struct dpp_flow_key *key,
					 const struct dpp_layers *l, struct dpp_outcome *o, __u32 arg)
{
	const struct dpp_upf_pdr *t = bpf_map_lookup_elem(&dpp_tunnels, &arg);
	struct dpp_upf_pdr *e = NULL;
	const struct dpp_config *cfg;
	int reason = 0;
	__u32 zero = 0;
	bool redirect;

	cfg = bpf_map_lookup_elem(&dpp_config, &zero);
	if (!key || !l || !o || !cfg)
		return XDP_ABORTED;
	if (!t || !(t->flags & DPP_UPF_PDR_ENTRY))
		return fallback(cfg, o, DPP_REASON_TUNNEL_MISSING);
	redirect = t->output == DPP_UPF_OUTPUT_REDIRECT;
	if (redirect && bpf_redirect_map(&dpp_ports, t->ifindex, 0) != XDP_REDIRECT)
		return fallback(cfg, o, DPP_REASON_PORT_UNAVAILABLE);
	if (t->flags & DPP_UPF_PDR_ENCAP) {
		e = tunnel_prepare(ctx, key, l, t, &reason);
		if (!e)
			return fallback(cfg, o, reason);
	}
	o->action = DPP_ACTION_TUNNEL;
	if (e && tunnel_encap(ctx, key, l, e))
		return tunnel_failed(o, DPP_REASON_TUNNEL_FAILED);
	if (!e && (t->flags & DPP_UPF_PDR_DECAP) && tunnelled(key, l) &&
	    upf_decap(ctx, l->ue_l3, key->family))
		return tunnel_failed(o, DPP_REASON_TUNNEL_FAILED);
	if (!redirect)
		return tunnel_route(ctx, t, o);
	o->egress_ifindex = t->ifindex;
	return XDP_REDIRECT;
}

/* The TUNNEL stage: the rule's arg is its entry of dpp_tunnels. */
static __always_inline int act_tunnel(const struct dpp_act_ctx *a)
{
	return dpp_tunnel(a->ctx, a->key, a->l, a->o, a->rule->arg);
}

#endif /* DPP_NF_TUNNEL_TUNNEL_H */
