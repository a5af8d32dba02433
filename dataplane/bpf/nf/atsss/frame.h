/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ATSSS on one frame, whichever program runs it (xdp_atsss alone, dpp_atsss_stage in the pipeline):
 * every frame is IPv4 or IPv6 behind Ethernet (and VLAN tags), read with the shared parsers. An
 * uplink packet (nf/atsss/uplink.h)
 *
 *   Ethernet [/ 802.1Q] / IPv4 or IPv6 (protocol 33) / DCCP / options / UE packet
 *
 * of a known path is decapsulated and passed (XDP_PASS: the kernel routes the UE packet to the
 * data network), or consumed (XDP_DROP) when it is a pure Ack; any other packet is a downlink one
 * (nf/atsss/downlink.h)
 *
 *   Ethernet [/ 802.1Q] / IPv4 or IPv6 (destination: the UE) / anything
 *
 * and gets XDP_TX when encapsulated (towards the picked path's next hop), XDP_PASS for no session,
 * XDP_DROP when every path of the session is down; a REDUNDANT session's packet is broadcast to
 * its group of ports in dpp_atsss_tx (XDP_REDIRECT), whose entries' programs (dpp_atsss_copy_*,
 * nf/atsss/copies.h) encapsulate a copy each (nf/atsss/redundant.h). A DCCP packet that is neither
 * valid MP-DCCP of a known path nor to a UE of a session is counted by reason and passed, or
 * dropped as the node's setting says (dpp_atsss_config). XDP_ABORTED: a frame it cannot read or encapsulate. */
#ifndef DPP_NF_ATSSS_FRAME_H
#define DPP_NF_ATSSS_FRAME_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "proto/eth.h"
#include "proto/ipv4.h"
#include "proto/ipv6.h"
#include "nf/atsss/downlink.h"
#include "nf/atsss/uplink.h"

static __always_inline const struct dpp_atsss_config *atsss_config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&dpp_atsss_config, &zero);
}

/* What is not valid MP-DCCP of a known path, counted: passed or dropped as the node says. */
static __always_inline int atsss_invalid(const struct dpp_atsss_config *cfg, __u32 reason)
{
	count_atsss_uplink(reason);
	return cfg && (cfg->flags & DPP_ATSSS_DROP_INVALID) ? XDP_DROP : XDP_PASS;
}

static __always_inline int downlink_verdict(struct xdp_md *ctx, enum atsss_verdict v)
{
	switch (v) {
	case ATSSS_SENT:
		return XDP_TX;
	case ATSSS_NO_SESSION:
		return XDP_PASS;
	case ATSSS_NO_PATH:
		return XDP_DROP;
	case ATSSS_COPIES:
		return atsss_broadcast(ctx);
	default:
		return XDP_ABORTED;
	}
}

/* An outer DCCP packet, the uplink's: its verdict, or -1 when it is of no path (it may be a
 * downlink packet to a UE; if not, the caller counts it DPP_ATSSS_UP_UNKNOWN_PATH). */
static __always_inline int uplink_verdict(struct xdp_md *ctx, const struct atsss_up *u,
					  const struct dpp_atsss_config *cfg)
{
	int reason = atsss_uplink(ctx, u, cfg);

	if (reason == DPP_ATSSS_UP_UNKNOWN_PATH)
		return -1;
	if (reason == DPP_ATSSS_UP_DECAPSULATED || reason == DPP_ATSSS_UP_ACK) {
		count_atsss_uplink(reason);
		return reason == DPP_ATSSS_UP_ACK ? XDP_DROP : XDP_PASS;
	}
	return atsss_invalid(cfg, reason);
}

/* The frame's verdict: uplink, downlink, or neither (XDP_PASS, untouched). */
static __always_inline int atsss_frame(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct cursor c = { .ctx = ctx, .pos = data, .end = end, .stop = end };
	struct dpp_flow_key key = {};
	const struct dpp_atsss_config *cfg = NULL; /* read for DCCP frames only: the others need none */
	struct dpp_layers l = {};
	enum atsss_verdict down;
	int verdict;
	__u32 l3, ip_end;
	__be16 proto;
	bool dccp;

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
	dccp = key.proto == DPP_ATSSS_IPPROTO_DCCP && !l.fragment; /* fragments: the kernel reassembles */
	if (dccp) {
		cfg = atsss_config();
		verdict = uplink_verdict(ctx, &(struct atsss_up){ .l3 = l3, .l4 = c.pos - data, .ip_end = ip_end,
								 .family = key.family, .src = key.src,
								 .dst = key.dst }, cfg);
		if (verdict >= 0)
			return verdict;
	}
	down = atsss_downlink(ctx, key.family, key.dst, l3, ip_end - l3);
	if (dccp && down == ATSSS_NO_SESSION)
		return atsss_invalid(cfg, DPP_ATSSS_UP_UNKNOWN_PATH);
	return downlink_verdict(ctx, down);
}

#endif /* DPP_NF_ATSSS_FRAME_H */
