/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The programs of the entries of dpp_atsss_tx's groups, one per position: a REDUNDANT frame's copy
 * for the session's path at that position (nf/atsss/redundant.h). The control plane puts the
 * program of position i in each group's entry i, with the interface that position's copies leave by. */
#ifndef DPP_NF_ATSSS_COPIES_H
#define DPP_NF_ATSSS_COPIES_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/atsss/downlink.h"

/* The program of `position`'s entry: the position is a constant in each, as the verifier needs. */
#define ATSSS_COPY_PROG(position)                              \
	SEC("xdp/devmap")                                      \
	int dpp_atsss_copy_##position(struct xdp_md *ctx)      \
	{                                                      \
		return atsss_copy_out(ctx, position);          \
	}

ATSSS_COPY_PROG(0)
ATSSS_COPY_PROG(1)
ATSSS_COPY_PROG(2)
ATSSS_COPY_PROG(3)

_Static_assert(DPP_ATSSS_MAX_PATHS == 4, "a copy program per position");

#endif /* DPP_NF_ATSSS_COPIES_H */
