/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The staged parser: outer Ethernet down to the UE packet inside GTP-U, one stage per layer over
 * the protocol parsers of proto/, whose contract the stages share. */
#ifndef DPP_CORE_PARSE_H
#define DPP_CORE_PARSE_H

#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "proto/eth.h"
#include "proto/ip.h"
#include "proto/l4.h"
#include "proto/overlay.h"
#include "proto/gtpu.h"

/* State handed from one parse stage to the next. Stages are BPF global functions, verified once
 * each rather than once per path through the packet, so they meet on an offset, not a pointer.
 * 8-byte aligned with the key first: the flow cache reads the key as 64-bit lanes (classify.h). */
struct dpp_parse {
	struct dpp_flow_key key;
	struct dpp_layers layers;
	__u16 off;   /* where the next header starts, from data */
	__be16 proto; /* EtherType of the next header; 0: nothing more to parse */
	__u16 dport; /* UDP destination port of the last parsed IP header, else 0 */
	__u16 stop;  /* c->stop from data: end of the innermost datagram (or UDP payload) so far */
	/* The N3 fast path's T-PDU (core/n3.h): the address its tunnel's IPv4 header goes to, read
	 * while the header was checked, so that the UPF need not find and check it again; 0 for the
	 * staged parser's packets (and for a tunnel to 0.0.0.0, no interface's address). It takes the
	 * struct's padding: the size and its zeroing are unchanged. */
	__be32 n3_daddr;
} __attribute__((aligned(8)));
_Static_assert(sizeof(struct dpp_parse) == 88, "n3_daddr takes the padding: no store more to zero");

/* Linear XDP buffers end within a page; a stage starting beyond it finds a truncated packet. */
#define DPP_MAX_PARSE_OFFSET 4095

/* A cursor at p->off; false when that lies outside the packet's first page. */
static __always_inline bool cursor_at(struct xdp_md *ctx, const struct dpp_parse *p, struct cursor *c)
{
	__u32 off = p->off;

	if (off > DPP_MAX_PARSE_OFFSET)
		return false;
	barrier_var(off); /* keep the mask below: it is what bounds the pointer for the verifier */
	c->ctx = ctx;
	c->pos = (void *)(long)ctx->data + (off & DPP_MAX_PARSE_OFFSET);
	c->end = (void *)(long)ctx->data_end;
	c->stop = (void *)(long)ctx->data + p->stop; /* a __u16: within what the verifier allows */
	return true;
}

static __always_inline void cursor_save(struct xdp_md *ctx, const struct cursor *c,
					struct dpp_parse *p)
{
	p->off = c->pos - (void *)(long)ctx->data;
	p->stop = c->stop - (void *)(long)ctx->data;
}

/* Before the first stage: nothing but the frame bounds the packet yet. */
static __always_inline void parse_start(struct xdp_md *ctx, struct dpp_parse *p)
{
	__u32 len = ctx->data_end - ctx->data;

	p->stop = len > 0xffff ? 0xffff : len;
}

/* Parse stages. Each starts at p->off, leaves p->off after what it parsed and returns 0 or a
 * reason, as the parsers of proto/ do. */

/* Ethernet and VLAN tags; the outermost Ethernet header (no IP parsed yet) records the VLAN id. */
__attribute__((noinline)) int dpp_stage_eth(struct xdp_md *ctx, struct dpp_parse *p)
{
	struct cursor c;
	__u16 *vlan;
	int r;

	if (!p || !cursor_at(ctx, p, &c))
		return DPP_REASON_TRUNC_ETH;
	/* Behind the barrier parse_eth tests the pointer itself, not the family it came from (kept in
	 * a stack slot, which 6.1's verifier, Debian 12's, does not tie to the pointer: it refused the
	 * store through a NULL it thought possible). */
	vlan = p->key.family ? NULL : &p->key.vlan;
	barrier_var(vlan);
	r = parse_eth(&c, &p->proto, vlan);
	cursor_save(ctx, &c, p);
	return r;
}

/* An IP header (p->proto) and its L4 header. The first one parsed is remembered as the outer
 * header, which FORWARD rewrites. */
__attribute__((noinline)) int dpp_stage_ip(struct xdp_md *ctx, struct dpp_parse *p)
{
	bool outer;
	struct cursor c;
	int r;

	if (!p)
		return DPP_REASON_TRUNC_IPV4;
	if (!cursor_at(ctx, p, &c))
		return p->proto == bpf_htons(ETH_P_IP) ? DPP_REASON_TRUNC_IPV4 : DPP_REASON_TRUNC_IPV6;
	outer = !p->layers.outer_family;
	p->layers.l3 = p->off;
	if (outer)
		p->layers.outer_l3 = p->off;
	r = parse_ip(&c, p->proto, &p->key, &p->layers);
	if (r)
		return r;
	if (outer) {
		p->layers.outer_family = p->key.family;
		p->layers.outer_proto = p->layers.l4_proto;
		p->layers.outer_l4 = p->layers.fragment ? 0 : c.pos - (void *)(long)ctx->data;
	}
	r = parse_l4(&c, &p->key, &p->layers, &p->dport);
	cursor_save(ctx, &c, p);
	p->proto = 0;
	return r;
}

/* The overlay announced by the outer L4 header, if any: p->proto becomes the EtherType of what it
 * carries (transparent Ethernet bridging, IPv4 or IPv6), or stays 0. */
__attribute__((noinline)) int dpp_stage_overlay(struct xdp_md *ctx, struct dpp_parse *p)
{
	struct cursor c;
	int r;

	if (!p)
		return DPP_REASON_TRUNC_VXLAN;
	if (!cursor_at(ctx, p, &c))
		return DPP_REASON_TRUNC_VXLAN;
	p->proto = 0;
	if (p->layers.l4_proto == IPPROTO_GRE) {
		r = parse_gre(&c, &p->key, &p->proto);
	} else if (p->dport == DPP_PORT_VXLAN) {
		r = parse_vxlan(&c, &p->key);
		p->proto = bpf_htons(ETH_P_TEB);
	} else if (p->dport == DPP_PORT_GENEVE) {
		r = parse_geneve(&c, &p->key, &p->proto);
	} else {
		return 0;
	}
	cursor_save(ctx, &c, p);
	return r;
}

/* GTP-U; after a T-PDU, p->proto is the EtherType of the UE packet (0 when it is not IP). */
__attribute__((noinline)) int dpp_stage_gtpu(struct xdp_md *ctx, struct dpp_parse *p)
{
	struct cursor c;
	int r;

	if (!p || !cursor_at(ctx, p, &c))
		return DPP_REASON_TRUNC_GTP;
	p->layers.tun_l3 = p->layers.l3;
	p->layers.gtp = p->off;
	r = parse_gtpu(&c, &p->key, &p->proto);
	cursor_save(ctx, &c, p);
	if (!r)
		p->layers.ue_l3 = p->off;
	return r;
}

/* Outer Ethernet/IP/L4, the overlay it announces with the inner Ethernet/IP/L4, and GTP-U with the
 * UE packet: every layer optional, one overlay and one GTP-U layer at most. */
static __always_inline int parse_staged(struct xdp_md *ctx, struct dpp_parse *p)
{
	int r;

	parse_start(ctx, p);
	r = dpp_stage_eth(ctx, p);
	if (r)
		return r;
	if (!is_ip_proto(p->proto))
		return DPP_REASON_NOT_IP;
	r = dpp_stage_ip(ctx, p);
	if (r || p->layers.fragment)
		return r;

	r = dpp_stage_overlay(ctx, p);
	if (r)
		return r;
	if (p->proto == bpf_htons(ETH_P_TEB)) {
		r = dpp_stage_eth(ctx, p);
		if (r)
			return r;
	}
	if (is_ip_proto(p->proto)) {
		r = dpp_stage_ip(ctx, p);
		if (r || p->layers.fragment)
			return r;
	} else if (p->proto) {
		return 0; /* not IP inside the overlay: classify on the overlay and the outer headers */
	}

	if (p->dport != DPP_PORT_GTPU)
		return 0;
	r = dpp_stage_gtpu(ctx, p);
	if (r || !p->proto)
		return r;
	return dpp_stage_ip(ctx, p);
}

#endif /* DPP_CORE_PARSE_H */
