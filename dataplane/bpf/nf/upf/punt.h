/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Frames the UPF hands to user space (netapp/upf/buffering.py) through the ring dpp_upf_punt, as
 * they arrived: a FAR that buffers (BUFF) has its packets kept there and dropped here, to be
 * replayed through this program once the FAR forwards; a FAR that duplicates (DUPL) has a copy
 * sent there, the packet itself going on as the FAR says. A frame the ring cannot take is counted
 * with its reason (a buffered one is then lost; a duplicated one goes on without its copy). */
#ifndef DPP_NF_UPF_PUNT_H
#define DPP_NF_UPF_PUNT_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "core/outcome.h"
#include "nf/upf/maps.h"

/* Copy the frame into the ring, for the PDR: 0, or the reason it was not (a global function:
 * verified once, whichever stage punts). */
__attribute__((noinline)) int dpp_upf_punt_frame(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
					   __u32 kind, __u32 ue_off, __u32 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u64 len = end - data, last;
	struct dpp_upf_punt *r;

	if (!pdr)
		return DPP_REASON_UPF_PUNT_FULL;
	/* One check of the last byte's index (an empty frame's wraps), the length that plus one:
	 * 6.1's verifier (Debian 12) learns no lower bound from a test for zero, and the copy refuses
	 * a length that may be 0. The first barrier keeps the difference of pointers whole. */
	barrier_var(len);
	last = len - 1;
	barrier_var(last);
	if (last >= DPP_UPF_PUNT_FRAME_MAX)
		return DPP_REASON_UPF_PUNT_TOO_LONG;
	len = last + 1;
	r = bpf_ringbuf_reserve(&dpp_upf_punt, sizeof(*r), 0);
	if (!r)
		return DPP_REASON_UPF_PUNT_FULL;
	r->seid = pdr->seid;
	r->pdr_id = pdr->pdr_id;
	r->kind = kind;
	r->family = family;
	r->ue_off = ue_off;
	r->reserved = 0;
	r->ifindex = ctx->ingress_ifindex;
	r->len = len;
	if (bpf_xdp_load_bytes(ctx, 0, r->frame, len)) {
		bpf_ringbuf_discard(r, 0);
		return DPP_REASON_UPF_PUNT_TOO_LONG;
	}
	bpf_ringbuf_submit(r, 0);
	return 0;
}

/* FAR BUFF: the frame to user space, dropped here (counted: upf_buffered, or why it was lost). */
static __always_inline int upf_buffer(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
				      struct dpp_outcome *o, __u32 ue_off, __u8 family)
{
	int lost = dpp_upf_punt_frame(ctx, pdr, DPP_UPF_PUNT_BUFFER, ue_off, family);

	o->reason = lost ? lost : DPP_REASON_UPF_BUFFERED;
	return XDP_DROP;
}

/* FAR DUPL: a copy to user space; a copy lost is counted, the packet goes on either way. */
static __always_inline void upf_duplicate(struct xdp_md *ctx, const struct dpp_upf_pdr *pdr,
					  struct dpp_outcome *o, __u32 ue_off, __u8 family)
{
	int lost = dpp_upf_punt_frame(ctx, pdr, DPP_UPF_PUNT_DUPLICATE, ue_off, family);

	if (lost)
		o->reason = lost;
}

#endif /* DPP_NF_UPF_PUNT_H */
