/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The user plane function, ahead of the classifier: on an interface with a UPF role
 * (dpp_upf_ifaces), a GTP-U T-PDU to our N3 (N9) address is looked up by TEID and decapsulated,
 * re-encapsulated to an N9 peer, dropped or passed as its PDR says; on an N6 interface a packet to a
 * UE address of the interface's network instance is encapsulated towards the gNB; GTP-U Echo
 * Requests to us are answered, Error Indications and End Markers counted and passed. A TEID or UE
 * address whose PDRs have SDF filters sends its packets on to the classifier, marked DPP_KEY_UPF:
 * the UPF's rule they match (act_upf) names their PDR. Whatever it does not take (other interfaces,
 * other addresses, other traffic) goes on to the classifier as if the UPF were not there. */
#ifndef DPP_NF_UPF_UPF_H
#define DPP_NF_UPF_UPF_H

#include <linux/bpf.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include "core/maps.h"
#include "core/outcome.h"
#include "core/parse.h"
#include "nf/upf/maps.h"
#include "nf/upf/decap.h"
#include "nf/upf/encap.h"
#include "nf/upf/echo.h"
#include "nf/upf/output.h"
#include "nf/upf/punt.h"
#include "nf/qos/police.h"

#define GTP_ERROR_INDICATION 26
#define GTP_END_MARKER 254

/* What upf returns for a packet that is not the UPF's: the classifier's. */
#define DPP_UPF_NOT_MINE -1

/* The UPF's interface entry of ifindex, or NULL: one inlined array lookup per packet. */
static __always_inline const struct dpp_upf_iface *upf_iface(__u32 ifindex)
{
	__u32 slot = ifindex % DPP_MAX_UPF_IFACES;
	const struct dpp_upf_iface *iface = bpf_map_lookup_elem(&dpp_upf_ifaces, &slot);

	if (!iface || iface->ifindex != ifindex || iface->role == DPP_UPF_ROLE_NONE)
		return NULL;
	return iface;
}

static __always_inline void upf_measure(__u32 urr, bool uplink, __u64 bytes)
{
	struct dpp_upf_usage *u = bpf_map_lookup_elem(&dpp_upf_usage, &urr);

	if (!u)
		return;
	if (uplink) {
		__sync_fetch_and_add(&u->ul_packets, 1);
		__sync_fetch_and_add(&u->ul_bytes, bytes);
	} else {
		__sync_fetch_and_add(&u->dl_packets, 1);
		__sync_fetch_and_add(&u->dl_bytes, bytes);
	}
}

/* Whether a packet of `bytes` passes policer `policer` and its parent (nf/qos/police.h: a flow's
 * MBR, then its session's AMBR), now: a global function for the entry (the UPF inlined in it) and
 * dpp_upf_sdf (inlined, the two policers' locals would take their frames past what dpp_xdp's frame
 * leaves of the 512 bytes of stack; called, dpp_xdp's, dpp_upf_sdf's and its frame take 480 of
 * them, rounded to 32 as kernels before 6.9 count frames).
 * Windows without the CPUs' credit (POLICE_WINDOW_CREDIT: its carve takes 16 bytes more of this
 * frame than the three have; the UPF's applier writes its windows no chunk). */
__attribute__((noinline)) int dpp_upf_police(__u32 policer, __u32 bytes)
{
	return police(policer, bytes, 0, !POLICE_WINDOW_CREDIT);
}

/* The PDR's policer (its QER's MBR of this direction, or its closed gate, then the session's AMBR;
 * none but on forwarding entries) lets its packet of ue_len bytes through. */
static __always_inline bool upf_police(const struct dpp_upf_pdr *pdr, __u32 ue_len)
{
	return !pdr->policer || dpp_upf_police(pdr->policer, ue_len);
}

/* Carry out a matched PDR on the UE packet at ue_off (of family 4 or 6, ue_len bytes). */
static __always_inline int upf_apply(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
				     struct dpp_outcome *o, __u32 ue_off, __u8 family, bool uplink)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 ue_len;

	o->action = DPP_ACTION_UPF;
	/* punt.h: BUFF to user space (measured when replayed), DUPL a copy there first */
	if (pdr->far == DPP_UPF_FAR_BUFFER)
		return upf_buffer(ctx, pdr, o, ue_off, family);
	if (pdr->flags & DPP_UPF_PDR_DUPL)
		upf_duplicate(ctx, pdr, o, ue_off, family);
	ue_len = ip_len_at(data, end, ue_off, family);
	/* on the UE packet's bytes as the URR counts them; before the URR: 29.244 measures usage after
	 * QoS enforcement unless the URR's Measurement Information sets MBQE (8.2.68), not taken here */
	if (!upf_police(pdr, ue_len)) {
		o->reason = DPP_REASON_QOS_POLICED;
		return XDP_DROP;
	}
	upf_measure(pdr->urr, uplink, ue_len);
	if (pdr->far == DPP_UPF_FAR_DROP) {
		o->reason = DPP_REASON_UPF_FAR_DROP;
		return XDP_DROP;
	}
	if (pdr->flags & DPP_UPF_PDR_DECAP) {
		if (upf_decap(ctx, ue_off, family))
			goto failed;
		ue_off = sizeof(struct ethhdr);
	}
	if ((pdr->flags & DPP_UPF_PDR_ENCAP) && upf_encap(ctx, pdr, ue_off, family))
		goto failed;
	return upf_output(ctx, pdr, o);
failed:
	o->reason = DPP_REASON_UPF_ENCAP_FAILED;
	return XDP_DROP;
}

/* An IPv4 header carrying GTP-U to daddr is addressed to the interface's own address. */
static __always_inline bool upf_ours4(const struct dpp_upf_iface *iface, __be32 daddr)
{
	return iface->has_ip4 && daddr == iface->addr4;
}

/* The IP header carrying GTP-U (the staged parser's: read again) is addressed to the interface's
 * own address. */
static __always_inline bool upf_ours(struct xdp_md *ctx, const struct dpp_layers *l,
				     const struct dpp_upf_iface *iface)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	void *ip = data + bounded_offset(l->tun_l3);
	struct ipv6hdr *ip6 = ip;
	struct iphdr *ip4 = ip;

	if ((void *)(ip4 + 1) > end)
		return false;
	if (ip4->version == 4)
		return upf_ours4(iface, ip4->daddr);
	if ((void *)(ip6 + 1) > end)
		return false;
	return iface->has_ip6 && ip6->daddr.in6_u.u6_addr32[0] == iface->addr6[0] &&
	       ip6->daddr.in6_u.u6_addr32[1] == iface->addr6[1] &&
	       ip6->daddr.in6_u.u6_addr32[2] == iface->addr6[2] &&
	       ip6->daddr.in6_u.u6_addr32[3] == iface->addr6[3];
}

/* GTP-U messages other than T-PDUs, to us. */
static __always_inline int upf_signalling(struct xdp_md *ctx, const struct dpp_parse *p,
					  struct dpp_outcome *o)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct gtpu_hdr *gtp = data + bounded_offset(p->layers.gtp);
	int verdict;

	if ((void *)(gtp + 1) > end)
		return DPP_UPF_NOT_MINE;
	o->action = DPP_ACTION_PASS;
	if (gtp->type == GTP_ERROR_INDICATION) {
		o->reason = DPP_REASON_UPF_ERROR_INDICATION;
		return XDP_PASS;
	}
	if (gtp->type == GTP_END_MARKER) {
		o->reason = DPP_REASON_UPF_END_MARKER;
		return XDP_PASS;
	}
	verdict = upf_echo(ctx, &p->layers);
	if (verdict < 0)
		return DPP_UPF_NOT_MINE;
	o->action = DPP_ACTION_UPF;
	o->reason = DPP_REASON_UPF_ECHO;
	return verdict;
}

/* A TEID's own entry: its slot of dpp_upf_teids (an inlined array lookup, one line; empty: none)
 * or, past the array, its entry of dpp_upf_uplink (keyed by the TEID with any QFI, the key made
 * only then), looked up only when that may hold one. The TEID is copied to the stack: key may be
 * dpp_upf_sdf's argument, which 6.1's verifier (Debian 12's) takes for no map's key. */
static __always_inline const struct dpp_upf_pdr *upf_teid_pdr(const struct dpp_flow_key *key)
{
	__u32 teid = key->teid;
	const struct dpp_upf_pdr *pdr = bpf_map_lookup_elem(&dpp_upf_teids, &teid);
	const struct dpp_upf_uplink_state *state;
	struct dpp_upf_ul_key k;
	__u32 zero = 0;

	if (pdr)
		return (pdr->flags & DPP_UPF_PDR_ENTRY) ? pdr : NULL;
	state = bpf_map_lookup_elem(&dpp_upf_uplink_state, &zero);
	if (!state || !state->teids)
		return NULL;
	k = (struct dpp_upf_ul_key){ .teid = key->teid, .qfi = DPP_UPF_QFI_ANY };
	return bpf_map_lookup_elem(&dpp_upf_uplink, &k);
}

/* The uplink PDR of a T-PDU: its TEID's entry, or where PDRs of the TEID differ by QFI, the entry
 * of its QFI if there is one. NULL: no PDR has it. With `classify`, the entry of a TEID whose PDRs
 * have SDF filters (DPP_UPF_PDR_SDF) as it is: the classifier chooses first. */
static __always_inline const struct dpp_upf_pdr *upf_uplink_pdr(const struct dpp_flow_key *key,
								 bool classify)
{
	const struct dpp_upf_pdr *pdr = upf_teid_pdr(key), *by_qfi;
	struct dpp_upf_ul_key k;

	if (classify && pdr && (pdr->flags & DPP_UPF_PDR_SDF))
		return pdr;
	if (pdr && (pdr->flags & DPP_UPF_PDR_BY_QFI) && (key->flags & DPP_KEY_GTP_QFI)) {
		k = (struct dpp_upf_ul_key){ .teid = key->teid, .qfi = key->qfi };
		by_qfi = bpf_map_lookup_elem(&dpp_upf_uplink, &k);
		if (by_qfi)
			return by_qfi;
	}
	if (pdr && (pdr->flags & DPP_UPF_PDR_NO_MATCH))
		return NULL;
	return pdr;
}

/* A pool's address (the UPF assigned it): its slot of dpp_upf_ue4 (an inlined array lookup; an
 * empty slot: none). dst: network order; addr: host order, inside the interface's pool. */
static __always_inline const struct dpp_upf_pdr *upf_pool_pdr(__u32 addr,
							      const struct dpp_upf_iface *iface)
{
	__u32 slot = iface->ue4_first + (addr - iface->ue4_base);
	const struct dpp_upf_pdr *pdr = bpf_map_lookup_elem(&dpp_upf_ue4, &slot);

	/* each map its own call: clang would otherwise merge lookups of two maps into one call of a
	 * branch-chosen map, which the verifier does not inline */
	barrier_var(pdr);
	return pdr && (pdr->flags & DPP_UPF_PDR_ENTRY) ? pdr : NULL;
}

/* The bucket of dpp_upf_dl4 of a UE IPv4 address (host order) in the interface's network instance:
 * the top dl4_bits bits of the address times DPP_UPF_DL4_HASH_MUL, xor the instance (below 1 <<
 * dl4_bits, so that an address's buckets in two instances differ and a way's address tells its
 * instance too). */
static __always_inline __u32 dl4_bucket(__u32 addr, const struct dpp_upf_iface *iface)
{
	__u64 h = (__u32)(addr * DPP_UPF_DL4_HASH_MUL);

	return (__u32)((h << (iface->dl4_bits & 31)) >> 32) ^ iface->net_instance;
}

/* The way holds dst (network order). Its ENTRY bit is read first and its address after: a way is
 * published and retired by that bit alone, and its address and action are written only while the
 * bit is clear and no program still reads the way (netapp/upf/ways.py argues the order). */
static __always_inline bool dl4_holds(const struct dpp_upf_pdr *way, __u32 dst)
{
	if (!(way->flags & DPP_UPF_PDR_ENTRY))
		return false;
	barrier();
	return way->ue_addr == dst;
}

/* An address the SMF gave: the way of its bucket of dpp_upf_dl4 that holds it (an inlined array
 * lookup a way, in order), or NULL. */
static __always_inline const struct dpp_upf_pdr *upf_dl4_pdr(__u32 dst,
							     const struct dpp_upf_iface *iface)
{
	__u32 slot = dl4_bucket(bpf_ntohl(dst), iface) * DPP_UPF_DL4_WAYS;
	const struct dpp_upf_pdr *way;
	int i;

	if (!iface->dl4_bits)
		return NULL;
#pragma unroll
	for (i = 0; i < DPP_UPF_DL4_WAYS; i++, slot++) {
		way = bpf_map_lookup_elem(&dpp_upf_dl4, &slot);
		barrier_var(way);
		if (!way)
			return NULL;
		if (dl4_holds(way, dst))
			return way;
	}
	return NULL;
}

/* dpp_upf_downlink may hold IPv4 entries (their buckets of dpp_upf_dl4 were full). */
static __always_inline bool upf_dl4_overflowed(void)
{
	const struct dpp_upf_downlink_state *state;
	__u32 zero = 0;

	state = bpf_map_lookup_elem(&dpp_upf_downlink_state, &zero);
	barrier_var(state);
	return state && state->ue4;
}

/* The downlink PDR of a packet to a UE address of the N6 interface's network instance, or NULL: an
 * IPv4 address of the instance's pool in dpp_upf_ue4 only, another IPv4 address in dpp_upf_dl4 then,
 * if it may hold some, dpp_upf_downlink; an IPv6 address in dpp_upf_downlink. */
static __always_inline const struct dpp_upf_pdr *upf_downlink_pdr(const struct dpp_flow_key *key,
								   const struct dpp_upf_iface *iface)
{
	const struct dpp_upf_pdr *pdr;
	struct dpp_upf_dl_key *k;
	__u32 addr, zero = 0;

	if (key->family == 4) {
		addr = bpf_ntohl(key->dst[0]);
		if (addr - iface->ue4_base < iface->ue4_count)
			return upf_pool_pdr(addr, iface);
		pdr = upf_dl4_pdr(key->dst[0], iface);
		if (pdr || !upf_dl4_overflowed())
			return pdr;
	}
	k = bpf_map_lookup_elem(&dpp_upf_dl_key_room, &zero);
	if (!k)
		return NULL;
	k->net_instance = iface->net_instance;
	k->family = key->family;
	__builtin_memcpy(k->addr, key->dst, sizeof(k->addr));
	return bpf_map_lookup_elem(&dpp_upf_downlink, k);
}

/* The PDRs of the packet's TEID or UE address have SDF filters: marked as the UPF's (only its rules
 * match it), the packet goes on to the classifier, whose UPF rule (act_upf) or miss decides. */
static __always_inline int upf_classify(struct dpp_parse *p)
{
	p->key.flags |= DPP_KEY_UPF;
	return DPP_UPF_NOT_MINE;
}

/* No PDR has the T-PDU's TEID: the default verdict (pass or drop), counted. */
static __always_inline int upf_teid_miss(struct dpp_outcome *o, __u32 default_verdict)
{
	o->action = DPP_ACTION_DEFAULT;
	o->reason = DPP_REASON_UPF_TEID_MISS;
	return default_verdict == XDP_DROP ? XDP_DROP : XDP_PASS;
}

/* A T-PDU with its UE packet's key, to our address: the N3 fast path's (whose tunnel is an IPv4
 * header it read the address of: nothing to find or check again), or the staged parser's. */
static __always_inline bool upf_tpdu_ours(struct xdp_md *ctx, const struct dpp_parse *p,
					  const struct dpp_upf_iface *iface, int reason)
{
	if (p->n3_daddr)
		return upf_ours4(iface, p->n3_daddr);
	return !reason && p->layers.gtp && (p->key.flags & DPP_KEY_GTP) && p->key.family &&
	       upf_ours(ctx, &p->layers, iface);
}

/* N3, N9: GTP-U to our address. A parser reason other than signalling leaves the packet to the
 * pipeline's default, as before. A T-PDU is tested first: a signalling message, the staged
 * parser's only, pays that test, not the fast path's T-PDUs the signalling's. */
static __always_inline int upf_gtpu(struct xdp_md *ctx, struct dpp_parse *p,
				    const struct dpp_upf_iface *iface, struct dpp_outcome *o,
				    int reason, __u32 default_verdict)
{
	const struct dpp_upf_pdr *pdr;

	if (!upf_tpdu_ours(ctx, p, iface, reason)) {
		if (reason == DPP_REASON_GTP_SIGNALLING && p->layers.gtp &&
		    upf_ours(ctx, &p->layers, iface))
			return upf_signalling(ctx, p, o);
		return DPP_UPF_NOT_MINE;
	}
	pdr = upf_uplink_pdr(&p->key, true);
	if (pdr && (pdr->flags & DPP_UPF_PDR_SDF))
		return upf_classify(p);
	if (!pdr)
		return upf_teid_miss(o, default_verdict);
	return upf_apply(ctx, pdr, o, p->layers.ue_l3, p->key.family, true);
}

/* N6: a packet, not tunnelled, to a UE address of the interface's network instance. */
static __always_inline int upf_downlink(struct xdp_md *ctx, struct dpp_parse *p,
					const struct dpp_upf_iface *iface, struct dpp_outcome *o)
{
	const struct dpp_upf_pdr *pdr;

	if (p->key.overlay != DPP_OVERLAY_NONE || (p->key.flags & DPP_KEY_GTP) || !p->key.family)
		return DPP_UPF_NOT_MINE;
	pdr = upf_downlink_pdr(&p->key, iface);
	if (!pdr)
		return DPP_UPF_NOT_MINE;
	if (pdr->flags & DPP_UPF_PDR_SDF)
		return upf_classify(p);
	return upf_apply(ctx, pdr, o, p->layers.outer_l3, p->key.family, false);
}

/* The UPF before the classifier: a verdict, or DPP_UPF_NOT_MINE. Inlined into the entry, so that
 * a packet the UPF takes pays no call and its interface and TEID are looked up once; interfaces
 * without a role cost one inlined array lookup. */
static __always_inline int upf(struct xdp_md *ctx, struct dpp_parse *p, struct dpp_outcome *o,
			       int reason, const struct dpp_config *cfg)
{
	const struct dpp_upf_iface *iface = upf_iface(p->key.ifindex);

	if (!iface)
		return DPP_UPF_NOT_MINE;
	if (iface->role == DPP_UPF_ROLE_N6)
		return reason ? DPP_UPF_NOT_MINE : upf_downlink(ctx, p, iface, o);
	return upf_gtpu(ctx, p, iface, o, reason, cfg->default_verdict);
}

/* The PDR without SDF filters of a classified packet's TEID or UE address (its exact entry), or
 * NULL: the packet matched none of the UPF's rules. */
static __always_inline const struct dpp_upf_pdr *upf_unfiltered_pdr(const struct dpp_flow_key *key)
{
	const struct dpp_upf_iface *iface;
	const struct dpp_upf_pdr *pdr;

	if (key->flags & DPP_KEY_GTP)
		return upf_uplink_pdr(key, false);
	iface = upf_iface(key->ifindex);
	if (!iface)
		return NULL;
	pdr = upf_downlink_pdr(key, iface);
	if (pdr && (pdr->flags & DPP_UPF_PDR_NO_MATCH))
		return NULL;
	return pdr;
}

/* A packet the UPF stage sent to the classifier (DPP_KEY_UPF): the PDR of the UPF rule it matched
 * (arg: its slot of dpp_upf_sdf_pdrs) or, with arg DPP_NONE (no rule matched), its PDR without SDF
 * filters, carried out as the UPF stage carries out its own (a global function: verified once). */
__attribute__((noinline)) int dpp_upf_sdf(struct xdp_md *ctx, struct dpp_flow_key *key,
					  struct dpp_layers *l, struct dpp_outcome *o, __u32 arg)
{
	const struct dpp_upf_pdr *pdr;
	const struct dpp_config *cfg;
	__u32 zero = 0;
	bool uplink;

	if (!key || !l || !o)
		return XDP_ABORTED;
	uplink = key->flags & DPP_KEY_GTP;
	if (arg == DPP_NONE)
		pdr = upf_unfiltered_pdr(key);
	else
		pdr = bpf_map_lookup_elem(&dpp_upf_sdf_pdrs, &arg);
	if (!pdr) {
		/* the configuration looked up here only, not kept across the PDR's: this frame,
		 * dpp_xdp's and dpp_upf_police's take 480 of the 512 bytes of stack rounded to 32,
		 * as kernels before 6.9 count frames */
		cfg = bpf_map_lookup_elem(&dpp_config, &zero);
		return cfg ? fallback(cfg, o, DPP_REASON_UPF_NO_PDR) : XDP_ABORTED;
	}
	return upf_apply(ctx, pdr, o, uplink ? l->ue_l3 : l->outer_l3, key->family, uplink);
}

/* The UPF stage of a classifier rule (and of an unmatched packet the UPF stage sent on): the PDR
 * with SDF filters the rule's arg names. Only packets marked DPP_KEY_UPF meet the UPF's rules. */
static __always_inline int act_upf(const struct dpp_act_ctx *a)
{
	if (!(a->key->flags & DPP_KEY_UPF))
		return fallback(a->cfg, a->o, DPP_REASON_NONE);
	return dpp_upf_sdf(a->ctx, (struct dpp_flow_key *)a->key, (struct dpp_layers *)a->l, a->o,
			   a->rule ? a->rule->arg : DPP_NONE);
}

#endif /* DPP_NF_UPF_UPF_H */
