// SPDX-License-Identifier: GPL-2.0-only
/* Bounces every frame: run in BPF_PROG_TEST_RUN live-frame mode by dpp-pktgen, it transmits the
 * test frames out of the given interface. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_tx(struct xdp_md *ctx __attribute__((unused)))
{
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
