// SPDX-License-Identifier: GPL-2.0-only
/* The ATSSS downlink (nf/atsss/downlink.h) alone, for tests and benchmarks: every frame is a UE
 * packet behind Ethernet (and VLAN tags), IPv4 or IPv6, read with the shared parsers:
 *
 *   Ethernet [/ 802.1Q] / IPv4 or IPv6 (destination: the UE) / anything
 *
 * xdp_atsss returns XDP_TX for a packet it encapsulated (towards the picked path's next hop),
 * XDP_PASS for one of no session, XDP_DROP when every path of the session is down, and
 * XDP_ABORTED for a frame it cannot read or encapsulate. The integration into the pipeline
 * (dpp.bpf.c) comes apart from this. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "proto/eth.h"
#include "proto/ipv4.h"
#include "proto/ipv6.h"
#include "nf/atsss/downlink.h"

/* Never read: puts ATSSS's ABI enums in this object's BTF, where tests/atsss/test_abi.py checks the
 * Python mirror against them. */
const volatile struct {
	enum dpp_atsss_mode mode;
	enum dpp_atsss_access access;
	enum dpp_atsss_path_flags path_flags;
} atsss_abi_enums;

SEC("xdp")
int xdp_atsss(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct cursor c = { .pos = data, .end = end, .stop = end };
	struct dpp_flow_key key = {};
	struct dpp_layers l = {};
	__u32 l3, ip_end;
	__be16 proto;

	if (parse_eth(&c, &proto, NULL))
		return XDP_ABORTED;
	l3 = c.pos - data;
	if (proto == bpf_htons(ETH_P_IP)) {
		if (parse_ipv4(&c, &key, &l))
			return XDP_ABORTED;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		if (parse_ipv6(&c, &key, &l))
			return XDP_ABORTED;
	} else {
		return XDP_PASS;
	}
	ip_end = c.stop - data; /* parse_ipv4/6 stop the cursor where the IP packet ends */
	barrier_var(ip_end);
	switch (atsss_downlink(ctx, key.family, key.dst, l3, ip_end - l3)) {
	case ATSSS_SENT:
		return XDP_TX;
	case ATSSS_NO_SESSION:
		return XDP_PASS;
	case ATSSS_NO_PATH:
		return XDP_DROP;
	default:
		return XDP_ABORTED;
	}
}

char LICENSE[] SEC("license") = "GPL";
