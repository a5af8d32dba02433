/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Outer header removal (TS 29.244 8.2.64, GTP-U/UDP/IP): everything before the UE packet goes,
 * VXLAN and its headers too when N3 came in one, and the outermost Ethernet header's addresses are
 * kept in front of the UE packet. */
#ifndef DPP_NF_UPF_DECAP_H
#define DPP_NF_UPF_DECAP_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "core/outcome.h"
#include "proto/eth.h"

static __always_inline __be16 ethertype_of(__u8 family)
{
	return family == 6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP);
}

/* Make the packet Ethernet + the UE packet at ue_off (of family 4 or 6). 0, or -1 with the packet
 * unchanged (the head moves last). */
static __always_inline int upf_decap(struct xdp_md *ctx, __u32 ue_off, __u8 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u16 macs[ETH_ALEN];

	if ((void *)(eth + 1) > end || ue_off < sizeof(*eth))
		return -1;
	eth_set_addrs(macs, eth->h_dest, eth->h_source);
	if (bpf_xdp_adjust_head(ctx, (int)bounded_offset(ue_off) - (int)sizeof(*eth)))
		return -1;
	eth = (void *)(long)ctx->data;
	if ((void *)(eth + 1) > (void *)(long)ctx->data_end)
		return -1;
	eth_set_addrs(eth, macs, macs + ETH_ALEN / 2);
	eth->h_proto = ethertype_of(family);
	return 0;
}

#endif /* DPP_NF_UPF_DECAP_H */
