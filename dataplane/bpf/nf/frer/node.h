/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* FRER's decisions on one frame, shared by the programs of a FRER node (dpp_frer.bpf.c) and the
 * pipeline's FRER stage (nf/frer/stage.h): the frame's stream, then generation (talker side) or
 * recovery (listener side). Each returns an XDP verdict, or FRER_ONWARD for a frame FRER leaves to
 * what comes after it: the kernel's stack on a FRER node, the pipeline on a NetApp node; generation
 * also FRER_UNGROUPED (below). */
#ifndef DPP_NF_FRER_NODE_H
#define DPP_NF_FRER_NODE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/reasons.h"
#include "nf/frer/identify.h"
#include "nf/frer/recover.h"
#include "nf/frer/replicate.h"

#define FRER_ONWARD (-1)
/* A generated stream's frame that cannot be replicated (no group of ports held): dropped or passed as
 * the program's setting says. */
#define FRER_UNGROUPED (-2)

/* The stream a frame belongs to here (0: none) and this node's part in it. */
struct frer_match {
	__u32 handle;
	struct dpp_frer_stream *stream;
};

/* This CPU's counters of the port `ifindex`, created zero on its first count; NULL when the map is
 * full. */
static __always_inline struct dpp_frer_port_stats *port_stats(__u32 ifindex)
{
	struct dpp_frer_port_stats zero = {}, *stats = bpf_map_lookup_elem(&dpp_frer_port_stats, &ifindex);

	if (stats)
		return stats;
	bpf_map_update_elem(&dpp_frer_port_stats, &ifindex, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&dpp_frer_port_stats, &ifindex);
}

static __always_inline void count_encode_error(__u32 ifindex)
{
	struct dpp_frer_port_stats *stats = port_stats(ifindex);

	if (stats)
		stats->encode_errors++;
}

static __always_inline void count_ungrouped(__u32 ifindex)
{
	struct dpp_frer_port_stats *stats = port_stats(ifindex);

	if (stats)
		stats->ungrouped++;
}

/* Every kind of stream identification: a FRER node's programs try them all. */
#define FRER_ALL_KINDS (DPP_FRER_GATE_NULL | DPP_FRER_GATE_NULL_ANY | DPP_FRER_GATE_IP)

/* Reads the frame's tags (f, c after them) and finds its stream by the identifications `kinds`
 * (enum dpp_frer_gate): false when an R-tag is cut short,
 * which is then counted as the port's encode error (*reason says so); frames without a readable
 * Ethernet header are nobody's stream. */
static __always_inline bool frer_frame(struct xdp_md *ctx, struct frer_frame *f, struct frer_match *m,
				       __u32 kinds, __u32 *reason)
{
	struct cursor c;

	m->handle = 0;
	m->stream = NULL;
	if (!frer_parse(ctx, f, &c)) {
		if (!f->tagged)
			return true;
		count_encode_error(ctx->ingress_ifindex);
		*reason = DPP_REASON_FRER_BAD_RTAG;
		return false;
	}
	m->handle = frer_identify(ctx, f, &c, kinds);
	if (m->handle)
		m->stream = bpf_map_lookup_elem(&dpp_frer_streams, &m->handle);
	return true;
}

static __always_inline bool frer_plays(const struct frer_match *m, __u8 role)
{
	return m->stream && m->stream->role == role;
}

/* Talker side: an untagged frame of a stream generated here gets its number and is replicated. A
 * stream with no group of ports held (dpp_frer_tx emptied under it) cannot be: its frame is
 * FRER_UNGROUPED, untouched and without a number (the listener sees no gap), *reason saying why and
 * its ingress port's ungrouped counter counting it (a FRER node has no reason counters). */
static __always_inline int frer_generate(struct xdp_md *ctx, const struct frer_frame *f,
					 const struct frer_match *m, __u32 *reason)
{
	void *ports;

	if (f->tagged || !frer_plays(m, DPP_FRER_ROLE_GENERATE))
		return FRER_ONWARD;
	ports = frer_ports(m->stream);
	if (!ports) {
		count_ungrouped(ctx->ingress_ifindex);
		*reason = DPP_REASON_FRER_NO_GROUP;
		return FRER_UNGROUPED;
	}
	return frer_replicate(ctx, f, m->handle, m->stream, ports);
}

/* Listener side: a frame of a stream recovered here passes once (its R-tag popped if the stream
 * says so) and goes to the stream's port, or onward; the others are dropped, *reason saying why. */
static __always_inline int frer_eliminate(struct xdp_md *ctx, const struct frer_frame *f,
					  const struct frer_match *m, __u32 *reason)
{
	struct dpp_frer_recovery *r;
	int decision;

	if (!frer_plays(m, DPP_FRER_ROLE_RECOVER)) {
		if (f->tagged)
			*reason = DPP_REASON_FRER_NO_STREAM;
		return FRER_ONWARD;
	}
	r = frer_recovery(m->handle);
	decision = frer_recover(r, m->handle, f->tagged, f->seq, bpf_ktime_get_ns());
	if (!frer_passes(decision)) {
		*reason = DPP_REASON_FRER_ELIMINATED;
		return XDP_DROP;
	}
	if (r && (r->flags & DPP_FRER_POP) && frer_pop(ctx, f)) {
		*reason = DPP_REASON_FRER_BAD_RTAG;
		return XDP_DROP;
	}
	return m->stream->deliver_ifindex ? bpf_redirect(m->stream->deliver_ifindex, 0) : FRER_ONWARD;
}

#endif /* DPP_NF_FRER_NODE_H */
