// SPDX-License-Identifier: GPL-2.0-only
/* FRER (IEEE 802.1CB) on a node of its own: the programs of a replicating node (talker side) and of
 * an eliminating node (listener side), as a network function that runs before the pipeline does on
 * the ports a protected stream crosses.
 *
 *   dpp_frer_talker    on the talker-facing port: a frame of a GENERATE stream (stream
 *                      identification, nf/frer/identify.h) gets the stream's next sequence number in
 *                      an R-tag and is broadcast to the FRER ports (dpp_frer_tx); anything else passes
 *   dpp_frer_egress    each FRER port's devmap program: a copy is kept on its stream's member ports
 *   dpp_frer_listener  on the path-facing ports: a frame of a RECOVER stream is passed once
 *                      (nf/frer/recover.h), its R-tag popped if the stream says so, and delivered
 *                      (bpf_redirect) to the stream's port, or to the kernel; an R-tag cut short is
 *                      an encode error of the port it came in on. Anything else passes.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/frer/identify.h"
#include "nf/frer/recover.h"
#include "nf/frer/replicate.h"

/* Never read: makes FRER's enums and the structs no map names part of this object's BTF, where
 * tests/frer/test_abi.py checks the Python mirror against them. */
const volatile struct {
	enum dpp_frer_algo algo;
	enum dpp_frer_flags flags;
	enum dpp_frer_role role;
	enum dpp_frer_decision decision;
} dpp_frer_abi_enums;

static __always_inline void count_encode_error(__u32 ifindex)
{
	struct dpp_frer_port_stats zero = {}, *stats = bpf_map_lookup_elem(&dpp_frer_port_stats, &ifindex);

	if (!stats) {
		bpf_map_update_elem(&dpp_frer_port_stats, &ifindex, &zero, BPF_NOEXIST);
		stats = bpf_map_lookup_elem(&dpp_frer_port_stats, &ifindex);
	}
	if (stats)
		stats->encode_errors++;
}

static __always_inline struct dpp_frer_stream *stream_of(__u32 handle, __u8 role)
{
	struct dpp_frer_stream *s = handle ? bpf_map_lookup_elem(&dpp_frer_streams, &handle) : NULL;

	return s && s->role == role ? s : NULL;
}

SEC("xdp")
int dpp_frer_talker(struct xdp_md *ctx)
{
	struct frer_frame f = {};
	struct dpp_frer_stream *s;
	struct cursor c;
	__u32 handle;

	if (!frer_parse(ctx, &f, &c) || f.tagged)
		return XDP_PASS; /* not a frame this node tags: the kernel's */
	handle = frer_identify(ctx, &f, &c);
	s = stream_of(handle, DPP_FRER_ROLE_GENERATE);
	if (!s)
		return XDP_PASS;
	return frer_replicate(ctx, &f, handle, s);
}

SEC("xdp/devmap")
int dpp_frer_egress(struct xdp_md *ctx)
{
	return frer_egress(ctx);
}

SEC("xdp")
int dpp_frer_listener(struct xdp_md *ctx)
{
	struct frer_frame f = {};
	struct dpp_frer_recovery *r;
	struct dpp_frer_stream *s;
	struct cursor c;
	__u32 handle;
	int decision;

	if (!frer_parse(ctx, &f, &c)) {
		if (f.tagged)
			count_encode_error(ctx->ingress_ifindex);
		return f.tagged ? XDP_DROP : XDP_PASS;
	}
	handle = frer_identify(ctx, &f, &c);
	s = stream_of(handle, DPP_FRER_ROLE_RECOVER);
	if (!s)
		return XDP_PASS;
	r = frer_recovery(handle);
	decision = frer_recover(r, f.tagged, f.seq, bpf_ktime_get_ns());
	if (!frer_passes(decision))
		return XDP_DROP;
	if (r && (r->flags & DPP_FRER_POP) && frer_pop(ctx, &f))
		return XDP_DROP;
	return s->deliver_ifindex ? bpf_redirect(s->deliver_ifindex, 0) : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
