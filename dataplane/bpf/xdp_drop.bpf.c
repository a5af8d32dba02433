// SPDX-License-Identifier: GPL-2.0-only
/* Drops every frame: a path of a testbed cut by 100% loss, with the link left up (this kernel may
 * have no netem). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_drop(struct xdp_md *ctx __attribute__((unused)))
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
