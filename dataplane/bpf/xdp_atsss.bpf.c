// SPDX-License-Identifier: GPL-2.0-only
/* ATSSS (nf/atsss/) alone, for tests and benchmarks: every frame goes through ATSSS
 * (nf/atsss/frame.h says what it does to each); the pipeline (dpp.bpf.c) hands it only the frames
 * that are ATSSS's (nf/atsss/stage.h). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/atsss/frame.h"
#include "nf/atsss/copies.h"
#include "nf/atsss/words.h"

/* Never read: puts ATSSS's ABI enums (and the structs no map holds) in this object's BTF, where tests/atsss/test_abi.py checks the
 * Python mirror against them. */
const volatile struct {
	enum dpp_atsss_mode mode;
	enum dpp_atsss_access access;
	enum dpp_atsss_session_flags session_flags;
	enum dpp_atsss_path_flags path_flags;
	enum dpp_atsss_uplink_reason uplink_reason;
	enum dpp_atsss_uplink_flags uplink_flags;
	struct dpp_atsss_ack ack[0]; /* the records of the ring dpp_atsss_acks (no space) */
	struct dpp_atsss_session_words words[0]; /* dpp_atsss_session_set's data (no space) */
} atsss_abi_enums;

SEC("xdp")
int xdp_atsss(struct xdp_md *ctx)
{
	return atsss_frame(ctx);
}

char LICENSE[] SEC("license") = "GPL";
