/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* DUPLICATE: send the packet out of every interface of the rule's group, one copy each. The
 * replication is FRER's (core/replicate.h): a broadcast to the rule's group in dpp_dup_tx, whose
 * entries are the group's interfaces only, so no copy needs an egress program to drop it. A copy
 * leaves as the packet came, unless its port decapsulates (dpp/nf/duplicate.h): the frames of
 * such a group carry where their UE packet starts, and that port's egress program (dup_decap)
 * removes the headers in front of it from its copy, with the UPF's code (nf/upf/decap.h). */
#ifndef DPP_NF_DUPLICATE_DUPLICATE_H
#define DPP_NF_DUPLICATE_DUPLICATE_H

#include "core/counters.h"
#include "core/maps.h"
#include "core/outcome.h"
#include "core/replicate.h"
#include "nf/duplicate/maps.h"
#include "nf/upf/decap.h"

/* Gives the frame the struct dpp_dup_meta of a decapsulating group: where its UE packet starts
 * when it is a GTP-U T-PDU (the family 0 when the T-PDU's payload is not IP), none otherwise. -1
 * when the frame cannot take the metadata. */
static __always_inline int dup_mark(const struct dpp_act_ctx *a)
{
	struct xdp_md *ctx = a->ctx;
	struct dpp_dup_meta *meta;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
		return -1;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return -1;
	meta->ue_off = 0;
	meta->family = 0;
	meta->pad = 0;
	if ((a->key->flags & DPP_KEY_GTP) && a->l->ue_l3) {
		meta->ue_off = a->l->ue_l3;
		meta->family = a->key->family;
	}
	return 0;
}

/* The DUPLICATE stage: the rule's arg is its group (a key of dpp_dup_tx). The ingress interface is
 * not excluded: a group that names it gets its copy back out of it. A frame of a decapsulating
 * group that cannot take its metadata is not copied (its decapsulated copy could not be made). */
static __always_inline int act_duplicate(const struct dpp_act_ctx *a)
{
	void *ports = replica_group(&dpp_dup_tx, a->rule->arg);

	if (!ports)
		return fallback(a->cfg, a->o, DPP_REASON_PORT_UNAVAILABLE);
	if ((a->rule->arg & DPP_DUP_GROUP_DECAP) && dup_mark(a))
		return fallback(a->cfg, a->o, DPP_REASON_TUNNEL_COPY_FAILED);
	a->o->action = DPP_ACTION_DUPLICATE;
	return bpf_redirect_map(ports, 0, BPF_F_BROADCAST);
}

/* Counts a copy the egress program drops (the only count of it: the pipeline counted the frame). */
static __always_inline int dup_copy_failed(struct xdp_md *ctx)
{
	count(&dpp_reasons, DPP_REASON_TUNNEL_COPY_FAILED,
	      (__u64)((long)ctx->data_end - (long)ctx->data));
	return XDP_DROP;
}

/* A copy on its way out of a decapsulating port: a GTP-U T-PDU leaves as its UE packet behind the
 * outermost Ethernet header's addresses, a packet without GTP-U as it came. A copy that cannot be
 * decapsulated (no metadata, a T-PDU whose payload is not IP, headers that could not go) is
 * dropped and counted, never sent as it came or half rewritten. */
static __always_inline int dup_decap(struct xdp_md *ctx)
{
	struct dpp_dup_meta *meta = (void *)(long)ctx->data_meta;
	__u16 ue_off;
	__u8 family;

	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return dup_copy_failed(ctx);
	ue_off = meta->ue_off;
	family = meta->family;
	if (!ue_off)
		return XDP_PASS;
	if ((family != 4 && family != 6) || upf_decap(ctx, ue_off, family))
		return dup_copy_failed(ctx);
	return XDP_PASS;
}

#endif /* DPP_NF_DUPLICATE_DUPLICATE_H */
