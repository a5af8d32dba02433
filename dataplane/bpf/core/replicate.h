/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Replication in XDP, shared by FRER (nf/frer/replicate.h) and DUPLICATE (nf/duplicate/): XDP
 * cannot clone a frame, so the frame is broadcast to every entry of a DEVMAP (BPF_F_BROADCAST),
 * which the kernel copies it to. Where the copies may go is a group of ports, an inner map of a
 * map of DEVMAP groups (broadcast_group): a frame is copied to its group's ports only, so its cost
 * grows with its own copies, not with every replicating port of the node, and no port of another
 * group (another rule's, another tenant's) is ever handed one. A frame whose copies need more on
 * their way out is marked with the id of what it is a copy of (its XDP metadata, which the kernel
 * copies with it): the entry's egress program reads the id back (replica_id). */
#ifndef DPP_CORE_REPLICATE_H
#define DPP_CORE_REPLICATE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* What a replicated frame carries to the egress programs, in front of its data. */
struct replica_meta {
	__u32 id;
};

/* The group of ports at entry `group` of `groups` (a map of DEVMAP or DEVMAP_HASH groups); NULL
 * when none is held there. */
static __always_inline void *replica_group(void *groups, __u32 group)
{
	return bpf_map_lookup_elem(groups, &group);
}

/* The frame broadcast to every port of entry `group` of `groups`; `flags`: more BPF_F_* of
 * bpf_redirect_map. XDP_ABORTED when no such group is held (the control plane writes a group before
 * the rules that name it). */
static __always_inline int broadcast_group(void *groups, __u32 group, __u64 flags)
{
	void *ports = replica_group(groups, group);

	if (!ports)
		return XDP_ABORTED;
	return bpf_redirect_map(ports, 0, BPF_F_BROADCAST | flags);
}

/* The frame marked with `id` and broadcast to `ports`, a group replica_group found (the caller
 * decides what a frame with no group gets before it changes the frame); XDP_ABORTED when the
 * frame cannot take the metadata. */
static __always_inline int replicate(struct xdp_md *ctx, void *ports, __u32 id, __u64 flags)
{
	struct replica_meta *meta;

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)))
		return XDP_ABORTED;
	meta = (void *)(long)ctx->data_meta;
	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return XDP_ABORTED;
	meta->id = id;
	return bpf_redirect_map(ports, 0, BPF_F_BROADCAST | flags);
}

/* In an egress program: the id a copy was marked with; false for a frame no replicate() marked. */
static __always_inline bool replica_id(struct xdp_md *ctx, __u32 *id)
{
	struct replica_meta *meta = (void *)(long)ctx->data_meta;

	if ((void *)(meta + 1) > (void *)(long)ctx->data)
		return false;
	*id = meta->id;
	return true;
}

#endif /* DPP_CORE_REPLICATE_H */
