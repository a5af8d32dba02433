/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Tunnel endpoints: a GTP-U packet's tunnel addresses as the ids rules name them by (dpp_tunnel_ends),
 * put into its key before it is classified (MEC 011's srcTunnelAddress and tgtTunnelAddress, "used
 * for GTP tunnel based traffic rule").
 *
 * The addresses are those of the IP header that carries the GTP-U header (layers.tun_l3): the outer
 * one of a plain N3 packet, the inner one of GTP-U in VXLAN, GENEVE or GRE, whose own outer addresses
 * are the overlay's, not the GTP tunnel's. A packet without GTP-U gets no ids. Nothing is looked up
 * while no rule names a tunnel address (dpp_config.tunnel_ends is 0), so other traffic pays one
 * compare of a config word already loaded. */
#ifndef DPP_CORE_ENDS_H
#define DPP_CORE_ENDS_H

#include <linux/ip.h>
#include <linux/ipv6.h>
#include "core/maps.h"
#include "core/parse.h"

/* The id of an address, 0 when no rule names it. */
static __always_inline __u8 tunnel_end_id(const struct dpp_tunnel_end *end)
{
	const __u32 *id = bpf_map_lookup_elem(&dpp_tunnel_ends, end);

	return id ? (__u8)*id : 0;
}

/* Sets the key's .tunnel_src and .tunnel_dst from the IP header at layers.tun_l3 (already parsed,
 * so whole within the packet; checked again for the verifier). A global function, verified once, whose
 * stack is not added to that of the actions the entry calls. */
__attribute__((noinline)) int dpp_stage_tunnel_ends(struct xdp_md *ctx, struct dpp_parse *p)
{
	void *data = (void *)(long)ctx->data, *data_end = (void *)(long)ctx->data_end;
	struct dpp_tunnel_end end = {};
	const struct ipv6hdr *ip6;
	const struct iphdr *ip;
	__u32 off;

	if (!p)
		return 0;
	off = p->layers.tun_l3 & DPP_MAX_PARSE_OFFSET;
	ip = data + off;
	ip6 = data + off;
	if ((void *)(ip + 1) > data_end)
		return 0;
	if (ip->version == 4) {
		end.family = 4;
		end.addr[0] = ip->saddr;
		p->key.tunnel_src = tunnel_end_id(&end);
		end.addr[0] = ip->daddr;
		p->key.tunnel_dst = tunnel_end_id(&end);
		return 0;
	}
	if ((void *)(ip6 + 1) > data_end)
		return 0;
	end.family = 6;
	__builtin_memcpy(end.addr, &ip6->saddr, sizeof(end.addr));
	p->key.tunnel_src = tunnel_end_id(&end);
	__builtin_memcpy(end.addr, &ip6->daddr, sizeof(end.addr));
	p->key.tunnel_dst = tunnel_end_id(&end);
	return 0;
}

/* Before the classifier: a GTP-U packet's tunnel ids, when some rule names a tunnel address. */
static __always_inline void tunnel_ends_fill(struct xdp_md *ctx, struct dpp_parse *p,
					     const struct dpp_config *cfg)
{
	if (cfg->tunnel_ends && (p->key.flags & DPP_KEY_GTP))
		dpp_stage_tunnel_ends(ctx, p);
}

#endif /* DPP_CORE_ENDS_H */
