/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The overlays: VXLAN, GENEVE and GRE, each giving the flow key its overlay and VNI (or GRE key)
 * (proto/cursor.h has the parsers' contract). */
#ifndef DPP_PROTO_OVERLAY_H
#define DPP_PROTO_OVERLAY_H

#include <linux/if_ether.h>
#include <bpf/bpf_endian.h>
#include "proto/eth.h"

#define GRE_F_CSUM 0x8000
#define GRE_F_ROUTING 0x4000
#define GRE_F_KEY 0x2000
#define GRE_F_SEQ 0x1000
#define GRE_VERSION 0x0007
#define VXLAN_F_I 0x08000000 /* RFC 7348: the VNI is valid */

struct vxlan_hdr {
	__be32 flags;
	__be32 vni; /* VNI in the top 24 bits */
};

struct geneve_hdr {
	__u8 ver_optlen; /* version (2 bits), option length in 4-byte words (6 bits) */
	__u8 flags;
	__be16 proto;
	__be32 vni; /* VNI in the top 24 bits */
};

struct gre_base {
	__be16 flags;
	__be16 proto;
};

static __always_inline int parse_vxlan(struct cursor *c, struct dpp_flow_key *key)
{
	struct vxlan_hdr *vx = c->pos;

	if (!cursor_has(c, sizeof(*vx)))
		return DPP_REASON_TRUNC_VXLAN;
	c->pos = vx + 1;
	key->overlay = DPP_OVERLAY_VXLAN;
	/* Without I the VNI field is reserved, whatever it holds. */
	if (vx->flags & bpf_htonl(VXLAN_F_I)) {
		key->vni = bpf_ntohl(vx->vni) >> 8;
		key->flags |= DPP_KEY_VNI;
	}
	return 0;
}

/* GENEVE: options are skipped by their length. *inner is the EtherType of what follows. */
static __always_inline int parse_geneve(struct cursor *c, struct dpp_flow_key *key, __be16 *inner)
{
	struct geneve_hdr *gn = c->pos;
	__u32 len;

	if (!cursor_has(c, sizeof(*gn)))
		return DPP_REASON_TRUNC_GENEVE;
	if (gn->ver_optlen >> 6)
		return DPP_REASON_BAD_GENEVE;
	len = sizeof(*gn) + (gn->ver_optlen & 0x3f) * 4;
	if (!cursor_has(c, len))
		return DPP_REASON_TRUNC_GENEVE;
	c->pos += len;
	*inner = gn->proto;
	key->overlay = DPP_OVERLAY_GENEVE;
	key->vni = bpf_ntohl(gn->vni) >> 8;
	key->flags |= DPP_KEY_VNI;
	if (*inner != bpf_htons(ETH_P_TEB) && *inner != bpf_htons(ETH_P_IP) &&
	    *inner != bpf_htons(ETH_P_IPV6))
		return DPP_REASON_BAD_GENEVE;
	return 0;
}

/* GRE (RFC 2784/2890): checksum, key and sequence are optional; the key is the overlay id, and
 * "no key" stays apart from key 0 (RFC 2890 section 2.1). */
static __always_inline int parse_gre(struct cursor *c, struct dpp_flow_key *key, __be16 *inner)
{
	struct gre_base *gre = c->pos;
	__u16 flags;
	__u32 len;
	__be32 *opt;

	if (!cursor_has(c, sizeof(*gre)))
		return DPP_REASON_TRUNC_GRE;
	flags = bpf_ntohs(gre->flags);
	if ((flags & GRE_VERSION) || (flags & GRE_F_ROUTING))
		return DPP_REASON_BAD_GRE;
	*inner = gre->proto;
	len = sizeof(*gre) + ((flags & GRE_F_CSUM) ? 4 : 0);
	opt = c->pos + len;
	len += ((flags & GRE_F_KEY) ? 4 : 0) + ((flags & GRE_F_SEQ) ? 4 : 0);
	if (!cursor_has(c, len))
		return DPP_REASON_TRUNC_GRE;
	if (flags & GRE_F_KEY) {
		if ((void *)(opt + 1) > c->end)
			return DPP_REASON_TRUNC_GRE;
		key->vni = bpf_ntohl(*opt);
		key->flags |= DPP_KEY_VNI;
	}
	c->pos += len;
	key->overlay = DPP_OVERLAY_GRE;
	if (*inner != bpf_htons(ETH_P_TEB) && *inner != bpf_htons(ETH_P_IP) &&
	    *inner != bpf_htons(ETH_P_IPV6))
		return DPP_REASON_BAD_GRE;
	return 0;
}

#endif /* DPP_PROTO_OVERLAY_H */
