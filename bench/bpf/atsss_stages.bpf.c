// SPDX-License-Identifier: GPL-2.0-only
/* Round-robin's downlink cut short after each of its stages, for bench/atsss/stages.py: each
 * program runs ATSSS's own code (nf/atsss/) up to its stage and returns XDP_TX there (XDP_DROP when
 * the stage finds nothing: no session, no path up, no room), so that the difference between two
 * consecutive programs, timed in the same blocks, is what that stage costs. The stages, in the
 * order the downlink runs them (nf/atsss/frame.h, downlink.h):
 *
 *   stage_parse      Ethernet and the IP header, the shared parsers
 *   stage_lookup     + the session found by the UE address (the index, nf/atsss/index.h), read
 *   stage_schedule   + round-robin's pick: its path read, the MP_SEQ number taken (atomic add)
 *   stage_encap      + the path's DCCP number (atomic add), the head moved, the outer headers
 *                      written and summed: the checksum of the header only (CsCov 1)
 *   stage_checksum   + the DCCP checksum as the session asks for it (the UE packet's sum)
 *   stage_full       + the path's counters: the downlink whole, atsss_frame as xdp_atsss runs it
 *
 * Round-robin sessions only (the bench writes no other); not built into the data plane. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/atsss/frame.h"

/* What the parse stage hands on: the UE address and where its packet is. */
struct stage_packet {
	struct dpp_flow_key key;
	__u32 l3;
	__u32 ue_len;
};

/* The frame's parse as atsss_frame does it; 0, or -1 when the frame is not IPv4 or IPv6. */
static __always_inline int stage_parse_frame(struct xdp_md *ctx, struct stage_packet *pkt)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct cursor c = { .ctx = ctx, .pos = data, .end = end, .stop = end };
	struct dpp_layers l = {};
	__be16 proto;

	if (parse_eth(&c, &proto, NULL))
		return -1;
	pkt->l3 = c.pos - data;
	if (proto == bpf_htons(ETH_P_IP)) {
		if (parse_ipv4(&c, &pkt->key, &l))
			return -1;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		if (parse_ipv6(&c, &pkt->key, &l))
			return -1;
	} else {
		return -1;
	}
	pkt->ue_len = (__u32)(c.stop - data) - pkt->l3;
	barrier_var(pkt->ue_len);
	return 0;
}

/* The UE's session as atsss_downlink finds it, or NULL (none, or no path). */
static __always_inline struct dpp_atsss_session *stage_session(const struct stage_packet *pkt)
{
	struct dpp_atsss_session *s = atsss_find_session(pkt->key.family, pkt->key.dst, true);

	return s && s->n_paths ? s : NULL;
}

SEC("xdp")
int stage_parse(struct xdp_md *ctx)
{
	struct stage_packet pkt = {};

	return stage_parse_frame(ctx, &pkt) ? XDP_DROP : XDP_TX;
}

SEC("xdp")
int stage_lookup(struct xdp_md *ctx)
{
	struct stage_packet pkt = {};

	if (stage_parse_frame(ctx, &pkt))
		return XDP_DROP;
	return stage_session(&pkt) ? XDP_TX : XDP_DROP;
}

SEC("xdp")
int stage_schedule(struct xdp_md *ctx)
{
	struct stage_packet pkt = {};
	struct dpp_atsss_session *s;
	__u64 mp_seq = 0;

	if (stage_parse_frame(ctx, &pkt))
		return XDP_DROP;
	s = stage_session(&pkt);
	if (!s)
		return XDP_DROP;
	return schedule_round_robin(s, &mp_seq, false) ? XDP_TX : XDP_DROP;
}

/* The stages from the schedule on: the encapsulation with the header's checksum only (cscov
 * forced to 1) or with the session's coverage, and the path's counters or not (constants). */
static __always_inline int stage_send(struct xdp_md *ctx, const bool session_coverage, const bool count)
{
	struct stage_packet pkt = {};
	struct dpp_atsss_session *s;
	struct dpp_atsss_path *p;
	__u64 mp_seq = 0, seq;
	__u8 cscov;

	if (stage_parse_frame(ctx, &pkt))
		return XDP_DROP;
	s = stage_session(&pkt);
	if (!s)
		return XDP_DROP;
	p = schedule_round_robin(s, &mp_seq, false);
	if (!p)
		return XDP_DROP;
	cscov = session_coverage ? atsss_cscov(s->flags) : 1;
	seq = __sync_fetch_and_add(&p->dccp_seq, 1) & ATSSS_SEQ_MASK;
	if (atsss_encap(ctx, p, seq, mp_seq & ATSSS_SEQ_MASK, pkt.l3, pkt.ue_len, cscov))
		return XDP_DROP;
	if (count)
		atsss_count(p, pkt.ue_len);
	return XDP_TX;
}

SEC("xdp")
int stage_encap(struct xdp_md *ctx)
{
	return stage_send(ctx, false, false);
}

SEC("xdp")
int stage_checksum(struct xdp_md *ctx)
{
	return stage_send(ctx, true, false);
}

SEC("xdp")
int stage_full(struct xdp_md *ctx)
{
	return atsss_frame(ctx);
}

char LICENSE[] SEC("license") = "GPL";
