// SPDX-License-Identifier: GPL-2.0-only
/* FRER (IEEE 802.1CB) on a node of its own: the programs of a replicating node (talker side) and of
 * an eliminating node (listener side), each attached to the ports a protected stream crosses. The
 * NetApp's pipeline takes the same decisions (nf/frer/node.h) in its FRER stage (nf/frer/stage.h).
 *
 *   dpp_frer_talker    on the talker-facing port: a frame of a GENERATE stream (stream
 *                      identification, nf/frer/identify.h) gets the stream's next sequence number in
 *                      an R-tag and is broadcast to the stream's group of member ports
 *                      (dpp_frer_tx), or dropped while the stream has no group held there;
 *                      anything else passes
 *   dpp_frer_egress    the devmap program of a member port that wants a VLAN id: it sets it
 *   dpp_frer_listener  on the path-facing ports: a frame of a RECOVER stream is passed once
 *                      (nf/frer/recover.h), its R-tag popped if the stream says so, and delivered
 *                      (bpf_redirect) to the stream's port, or to the kernel; an R-tag cut short is
 *                      an encode error of the port it came in on. Anything else passes.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/frer/node.h"

/* Never read: makes FRER's enums and the structs no map names part of this object's BTF, where
 * tests/frer/test_abi.py checks the Python mirror against them. */
const volatile struct {
	enum dpp_frer_algo algo;
	enum dpp_frer_flags flags;
	enum dpp_frer_role role;
	enum dpp_frer_decision decision;
	enum dpp_frer_gate gate;
} dpp_frer_abi_enums;

/* What the node does with a frame FRER leaves alone: the kernel's. */
static __always_inline int onward_to_kernel(int verdict)
{
	return verdict == FRER_ONWARD ? XDP_PASS : verdict;
}

SEC("xdp")
int dpp_frer_talker(struct xdp_md *ctx)
{
	struct frer_frame f = {};
	struct frer_match m;
	__u32 reason = 0;
	int verdict;

	if (!frer_frame(ctx, &f, &m, FRER_ALL_KINDS, &reason))
		return XDP_PASS; /* not a frame this node tags: the kernel's */
	verdict = frer_generate(ctx, &f, &m, &reason);
	if (verdict == FRER_UNGROUPED)
		return XDP_DROP; /* a protected stream's frame goes over its paths or nowhere */
	return onward_to_kernel(verdict);
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
	struct frer_match m;
	__u32 reason = 0;

	if (!frer_frame(ctx, &f, &m, FRER_ALL_KINDS, &reason))
		return XDP_DROP;
	return onward_to_kernel(frer_eliminate(ctx, &f, &m, &reason));
}

char LICENSE[] SEC("license") = "GPL";
