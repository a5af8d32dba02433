/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Replication in XDP, shared by FRER (nf/frer/replicate.h) and DUPLICATE (nf/duplicate/): XDP
 * cannot clone a frame, so the frame is marked with the id of what it is a copy of (its XDP
 * metadata, which the kernel copies with it) and broadcast to every entry of a DEVMAP
 * (BPF_F_BROADCAST); on each copy's way out, the entry's egress program reads the id back
 * (replica_id) and keeps the copy only where its table says the id goes. */
#ifndef DPP_CORE_REPLICATE_H
#define DPP_CORE_REPLICATE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* What a replicated frame carries to the egress programs, in front of its data. */
struct replica_meta {
	__u32 id;
};

/* The frame marked with `id` and broadcast to every entry of `ports` (a DEVMAP or DEVMAP_HASH);
 * `flags`: more BPF_F_* of bpf_redirect_map (BPF_F_EXCLUDE_INGRESS). XDP_ABORTED when the frame
 * cannot take the metadata. */
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
