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

	c->ctx = ctx;
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

/* Pops the R-tag behind the frame's first `len` bytes (the addresses, and the VLAN tags): those
 * bytes move 6 up, over the tag's EtherType, reserved field and sequence number, all read before
 * any is written; then the head moves past the 6 bytes left behind. The tag's last field, the
 * EtherType it carried, is then in place behind them: nothing else is written, and the frame needs
 * no second bounds check. len is a constant once inlined. */
static __always_inline int frer_pop_over(struct xdp_md *ctx, const __u32 len)
{
	void *data = (void *)(long)ctx->data;
	__u64 first, middle = 0;
	__u32 last;

	if (data + len + sizeof(__be16) + DPP_FRER_RTAG_LEN > (void *)(long)ctx->data_end)
		return -1;
	/* as words (a byte copy is what the compiler makes of a memcpy into a packet): bytes 0-7,
	 * 8-15 when there is a VLAN tag, and the last four, which may overlap the others */
	first = *(__u64 *)data;
	if (len >= 16)
		middle = *(__u64 *)(data + 8);
	last = *(__u32 *)(data + len - 4);
	*(__u64 *)(data + DPP_FRER_RTAG_LEN) = first;
	if (len >= 16)
		*(__u64 *)(data + DPP_FRER_RTAG_LEN + 8) = middle;
	*(__u32 *)(data + DPP_FRER_RTAG_LEN + len - 4) = last;
	return bpf_xdp_adjust_head(ctx, DPP_FRER_RTAG_LEN) ? -1 : 0;
}

/* Removes the R-tag of a parsed frame (nothing to do untagged): 0, or a negative error when the
 * frame is too short for it (not delivered then). */
static __always_inline int frer_pop(struct xdp_md *ctx, const struct frer_frame *f)
{
	if (!f->tagged)
		return 0;
	if (f->at == 2 * ETH_ALEN)
		return frer_pop_over(ctx, 2 * ETH_ALEN);
	if (f->at == 2 * ETH_ALEN + FRER_VLAN_LEN)
		return frer_pop_over(ctx, 2 * ETH_ALEN + FRER_VLAN_LEN);
	return frer_pop_over(ctx, 2 * ETH_ALEN + 2 * FRER_VLAN_LEN);
}

#endif /* DPP_NF_FRER_RTAG_H */
