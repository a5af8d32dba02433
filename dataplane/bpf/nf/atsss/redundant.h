/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* REDUNDANT (TS 29.244's redundant steering mode): every downlink packet of the session goes on
 * every path that is up, all copies with the one MP_SEQ number the scheduler took (the UE keeps the
 * first copy that arrives and drops the others by that number), each with its own path's DCCP
 * sequence number and outer header.
 *
 * How the copies are made: XDP cannot clone a frame, and XDP_TX sends it once. The frame is marked
 * (XDP metadata: the slots of the paths up by position, the MP_SEQ number, where the UE packet is)
 * and broadcast to the session's group of ports in dpp_atsss_tx (bpf_redirect_map, BPF_F_BROADCAST),
 * as FRER's replication does (nf/frer/replicate.h): the kernel copies the frame, metadata included,
 * once per entry of the group, and each
 * entry's program (dpp_atsss_copy_<position>) encapsulates its copy for the session's path at its
 * position, or drops it when the session has no path up there. The alternatives cost more: a TC
 * program cloning sk_buffs (bpf_clone_redirect) allocates an sk_buff per copy, after the stack took
 * the frame; sending copies from user space takes every packet through a ring. */
#ifndef DPP_NF_ATSSS_REDUNDANT_H
#define DPP_NF_ATSSS_REDUNDANT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/maps.h"

/* What a REDUNDANT frame carries to the copies' programs, in front of its data (32 bytes: the most
 * XDP metadata may hold). */
struct atsss_copy_meta {
	__u32 path[DPP_ATSSS_MAX_PATHS]; /* the slot of each position's path if it is up; 0: no copy */
	__u64 mp_seq;
	__u16 l3;     /* where the UE packet starts */
	__u16 ue_len; /* and its length */
	__u8 flags;   /* the session's (enum dpp_atsss_session_flags) */
	__u8 group;   /* the session's group of ports (dpp_atsss_tx): its tx_group */
	__u8 reserved[2];
};

_Static_assert(sizeof(struct atsss_copy_meta) <= 32, "XDP metadata holds 32 bytes at most");

/* The frame marked for a copy on each path of `up` (positions, as bits), all numbered mp_seq. */
static __always_inline int atsss_mark_copies(struct xdp_md *ctx, const struct dpp_atsss_session *s, __u32 up,
					     __u64 mp_seq, __u32 l3, __u32 ue_len)
{
	struct atsss_copy_meta *m;
	int i;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*m)))
		return -1;
	m = (void *)(long)ctx->data_meta;
	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return -1;
#pragma unroll
	for (i = 0; i < DPP_ATSSS_MAX_PATHS; i++)
		m->path[i] = (up & (1u << i)) ? s->path[i] : 0;
	m->mp_seq = mp_seq;
	m->l3 = l3;
	m->ue_len = ue_len;
	m->flags = s->flags;
	m->group = s->tx_group;
	m->reserved[0] = m->reserved[1] = 0;
	return 0;
}

/* The marked frame broadcast to its session's group of ports; XDP_DROP when the group has none
 * (the control plane has not given it ports yet), XDP_ABORTED for a frame not marked. */
static __always_inline int atsss_broadcast(struct xdp_md *ctx)
{
	struct atsss_copy_meta *m = (void *)(long)ctx->data_meta;
	__u32 group;
	void *ports;

	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return XDP_ABORTED;
	group = m->group;
	ports = bpf_map_lookup_elem(&dpp_atsss_tx, &group);
	if (!ports)
		return XDP_DROP;
	return bpf_redirect_map(ports, 0, BPF_F_BROADCAST);
}

#endif /* DPP_NF_ATSSS_REDUNDANT_H */
