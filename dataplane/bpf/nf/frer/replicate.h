/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The talker side of FRER (IEEE 802.1CB 7.4.1, 7.5): a stream's next sequence number, an R-tag
 * pushed behind the addresses and VLAN tags, the frame broadcast to the group of the stream's
 * member ports (dpp_frer_tx, a map of DEVMAP groups, one per distinct set of ports, the stream's
 * tx_group; core/replicate.h, which DUPLICATE shares), so a frame costs its own copies whatever
 * other streams replicate to. A member
 * port that wants a VLAN id runs the egress program (frer_egress), which rewrites or pushes it; the
 * stream handle rides to it as the replica's id. The other members run no program. */
#ifndef DPP_NF_FRER_REPLICATE_H
#define DPP_NF_FRER_REPLICATE_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "core/replicate.h"
#include "nf/frer/maps.h"
#include "nf/frer/rtag.h"

/* SequenceGenerationAlgorithm (7.4.1.4): the counter is shared by the CPUs that receive the stream,
 * so it moves by one atomic add; its low 16 bits are the number. */
static __always_inline __u16 frer_next_seq(struct dpp_frer_stream *s)
{
	return (__u16)__sync_fetch_and_add(&s->next_seq, 1);
}

/* Opens DPP_FRER_RTAG_LEN bytes behind the first `len` bytes (addresses and VLAN tags): the frame's
 * EtherType, moved with them, becomes the R-tag's, and the old one, where it stays, the tag's next.
 * len is a constant once inlined. */
static __always_inline int frer_push_at(struct xdp_md *ctx, __u16 seq, const __u32 len)
{
	__u8 head[2 * ETH_ALEN + 2 * FRER_VLAN_LEN];
	void *data = (void *)(long)ctx->data;
	struct rtag *tag;
	__be16 *type;

	if (data + len > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(head, data, len);
	if (bpf_xdp_adjust_head(ctx, -DPP_FRER_RTAG_LEN))
		return -1;
	data = (void *)(long)ctx->data;
	type = data + len;
	tag = (void *)(type + 1);
	if ((void *)(tag + 1) > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(data, head, len);
	*type = bpf_htons(DPP_FRER_RTAG_ETHERTYPE);
	tag->reserved = 0;
	tag->seq = bpf_htons(seq); /* tag->next: the frame's EtherType, in place */
	return 0;
}

/* Pushes an R-tag with `seq` into a parsed untagged frame. */
static __always_inline int frer_push(struct xdp_md *ctx, const struct frer_frame *f, __u16 seq)
{
	if (f->at == 2 * ETH_ALEN)
		return frer_push_at(ctx, seq, 2 * ETH_ALEN);
	if (f->at == 2 * ETH_ALEN + FRER_VLAN_LEN)
		return frer_push_at(ctx, seq, 2 * ETH_ALEN + FRER_VLAN_LEN);
	return frer_push_at(ctx, seq, 2 * ETH_ALEN + 2 * FRER_VLAN_LEN);
}

/* The group of the stream's member ports (its tx_group of dpp_frer_tx); NULL when none is held
 * there. */
static __always_inline void *frer_ports(const struct dpp_frer_stream *s)
{
	return replica_group(&dpp_frer_tx, s->tx_group);
}

/* The stream's frame, numbered and tagged, to `ports` (frer_ports) but the one it came in on.
 * XDP_ABORTED when the frame cannot take the tag or the metadata. */
static __always_inline int frer_replicate(struct xdp_md *ctx, const struct frer_frame *f, __u32 stream,
					  struct dpp_frer_stream *s, void *ports)
{
	if (frer_push(ctx, f, frer_next_seq(s)))
		return XDP_ABORTED;
	return replicate(ctx, ports, stream, BPF_F_EXCLUDE_INGRESS);
}

/* Gives an untagged frame a VLAN tag with `vid` (priority 0) behind its addresses. */
static __always_inline int frer_push_vlan(struct xdp_md *ctx, __u16 vid)
{
	__u8 addresses[2 * ETH_ALEN];
	void *data = (void *)(long)ctx->data;
	struct vlan_tag *tag;
	__be16 *type;

	if (data + sizeof(addresses) > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(addresses, data, sizeof(addresses));
	if (bpf_xdp_adjust_head(ctx, -FRER_VLAN_LEN))
		return -1;
	data = (void *)(long)ctx->data;
	type = data + sizeof(addresses);
	tag = (void *)(type + 1);
	if ((void *)(tag + 1) > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(data, addresses, sizeof(addresses));
	*type = bpf_htons(ETH_P_8021Q);
	tag->tci = bpf_htons(vid & 0x0fff); /* tag->proto: the frame's EtherType, in place */
	return 0;
}

/* A copy on its way out of ctx->egress_ifindex, a member port of its stream that names a VLAN id:
 * the outermost tag's id rewritten, or a tag pushed. A port its stream does not list drops it (the
 * group holds only members; this guards a group written ahead of its members). */
static __always_inline int frer_egress(struct xdp_md *ctx)
{
	struct dpp_frer_member_key key;
	struct dpp_frer_member *member;
	struct vlan_tag *vlan;
	void *data, *end;
	__be16 *type;

	if (!replica_id(ctx, &key.stream))
		return XDP_DROP; /* not a replicated frame */
	key.ifindex = ctx->egress_ifindex;
	member = bpf_map_lookup_elem(&dpp_frer_members, &key);
	if (!member)
		return XDP_DROP;
	if (!member->vlan)
		return XDP_PASS;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	type = data + 2 * ETH_ALEN;
	vlan = (void *)(type + 1);
	if ((void *)(vlan + 1) > end)
		return XDP_DROP;
	if (!is_vlan_proto(*type))
		return frer_push_vlan(ctx, member->vlan) ? XDP_DROP : XDP_PASS;
	vlan->tci = (vlan->tci & bpf_htons(0xf000)) | bpf_htons(member->vlan & 0x0fff);
	return XDP_PASS;
}

#endif /* DPP_NF_FRER_REPLICATE_H */
