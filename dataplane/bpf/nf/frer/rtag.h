/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The R-tag (IEEE 802.1CB 7.8) of an Ethernet frame: found after the MAC addresses and at most one
 * VLAN tag, read, and removed (popped) before a recovered frame is delivered. */
#ifndef DPP_NF_FRER_RTAG_H
#define DPP_NF_FRER_RTAG_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "dpp/nf/frer.h"

#define FRER_VLAN_LEN 4

struct frer_rtag {
	__be16 reserved;
	__be16 seq;
	__be16 next; /* the EtherType of what the tag carries */
};

/* Where a frame's R-tag is: `at` the offset of its EtherType field (12, or 16 behind a VLAN tag),
 * and the sequence number; `payload` the offset of what follows the tag or, untagged, of what
 * follows the EtherType. */
struct frer_frame {
	bool tagged;
	__u16 seq;
	__u16 at;
	__u16 payload;
	__be16 next; /* the EtherType after the tag (or the frame's, untagged) */
};

/* Reads the frame's tags; false when it is too short for the headers it announces. */
static __always_inline bool frer_parse(struct xdp_md *ctx, struct frer_frame *f)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__be16 *type = data + 2 * ETH_ALEN;
	struct frer_rtag *tag;

	if ((void *)(type + 1) > end)
		return false;
	f->at = 2 * ETH_ALEN;
	if (*type == bpf_htons(ETH_P_8021Q) || *type == bpf_htons(ETH_P_8021AD)) {
		type = (void *)type + FRER_VLAN_LEN;
		if ((void *)(type + 1) > end)
			return false;
		f->at += FRER_VLAN_LEN;
	}
	f->tagged = *type == bpf_htons(DPP_FRER_RTAG_ETHERTYPE);
	if (!f->tagged) {
		f->next = *type;
		f->payload = f->at + 2;
		return true;
	}
	tag = (void *)(type + 1);
	if ((void *)(tag + 1) > end)
		return false;
	f->seq = bpf_ntohs(tag->seq);
	f->next = tag->next;
	f->payload = f->at + 2 + DPP_FRER_RTAG_LEN;
	return true;
}

/* Moves the frame's first `len` bytes (the addresses, and the VLAN tag) up over the R-tag and writes
 * the EtherType it carried behind them. len is a constant once inlined. */
static __always_inline int frer_pop_over(struct xdp_md *ctx, __be16 next, const __u32 len)
{
	__u8 head[2 * ETH_ALEN + FRER_VLAN_LEN];
	void *data = (void *)(long)ctx->data;

	if (data + len > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(head, data, len);
	if (bpf_xdp_adjust_head(ctx, DPP_FRER_RTAG_LEN))
		return -1;
	data = (void *)(long)ctx->data;
	if (data + len + sizeof(next) > (void *)(long)ctx->data_end)
		return -1;
	__builtin_memcpy(data, head, len);
	*(__be16 *)(data + len) = next;
	return 0;
}

/* Removes the R-tag of a parsed frame (nothing to do untagged): 0, or a negative error when the
 * frame is too short for it (not delivered then). */
static __always_inline int frer_pop(struct xdp_md *ctx, const struct frer_frame *f)
{
	if (!f->tagged)
		return 0;
	if (f->at == 2 * ETH_ALEN)
		return frer_pop_over(ctx, f->next, 2 * ETH_ALEN);
	return frer_pop_over(ctx, f->next, 2 * ETH_ALEN + FRER_VLAN_LEN);
}

#endif /* DPP_NF_FRER_RTAG_H */
