/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The R-tag (IEEE 802.1CB 7.8) of an Ethernet frame: found after the MAC addresses and the VLAN tags
 * (proto/eth.h, proto/rtag.h), and removed (popped) before a recovered frame is delivered. */
#ifndef DPP_NF_FRER_RTAG_H
#define DPP_NF_FRER_RTAG_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "dpp/nf/frer.h"
#include "proto/eth.h"
#include "proto/rtag.h"

#define FRER_VLAN_LEN 4

/* A frame's tags: `at` the offset of the R-tag's EtherType field (behind the addresses and the VLAN
 * tags), its sequence number; `payload` the offset of what follows the tag or, untagged, the
 * EtherType; `next` the EtherType of the payload. */
struct frer_frame {
	bool tagged;
	__u16 seq;
	__u16 vlan; /* the outermost VLAN id, 0 untagged */
	__u16 at;
	__u16 payload;
	__be16 next;
};

/* Reads the frame's Ethernet header, VLAN tags and R-tag with the shared parsers, leaving `c` after
 * them; false when one is cut short or there are more VLAN tags than they read. */
static __always_inline bool frer_parse(struct xdp_md *ctx, struct frer_frame *f, struct cursor *c)
{
	void *data = (void *)(long)ctx->data;
	__be16 proto;

	c->pos = data;
	c->end = c->stop = (void *)(long)ctx->data_end;
	f->vlan = 0;
	if (parse_eth(c, &proto, &f->vlan))
		return false;
	f->at = c->pos - data - sizeof(proto);
	if (parse_rtag(c, &proto, &f->tagged, &f->seq))
		return false;
	f->next = proto;
	f->payload = c->pos - data;
	return true;
}

/* Moves the frame's first `len` bytes (the addresses, and the VLAN tag) up over the R-tag and writes
 * the EtherType it carried behind them. len is a constant once inlined. */
static __always_inline int frer_pop_over(struct xdp_md *ctx, __be16 next, const __u32 len)
{
	__u8 head[2 * ETH_ALEN + 2 * FRER_VLAN_LEN];
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
	if (f->at == 2 * ETH_ALEN + FRER_VLAN_LEN)
		return frer_pop_over(ctx, f->next, 2 * ETH_ALEN + FRER_VLAN_LEN);
	return frer_pop_over(ctx, f->next, 2 * ETH_ALEN + 2 * FRER_VLAN_LEN);
}

#endif /* DPP_NF_FRER_RTAG_H */
