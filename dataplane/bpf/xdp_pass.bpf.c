// SPDX-License-Identifier: GPL-2.0-only
/* An empty XDP program: the floor of the benchmarks, and what a veth peer needs attached so that
 * frames redirected into its link are received. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx __attribute__((unused)))
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
