// SPDX-License-Identifier: GPL-2.0-only
/* PLACEHOLDER entry program: replaced by the real pipeline. Defines the maps and load-time knobs. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp_maps.h"

/* Load-time knobs, written by libdpp through the skeleton's rodata. */
const volatile __u8 cfg_flow_cache = 1;
const volatile __u8 cfg_trace = 0;

SEC("xdp")
int dpp_xdp(struct xdp_md *ctx __attribute__((unused)))
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
