/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of forwarding to alternative nodes (bpf/nf/forward/): groups of members, each a rewrite
 * of the destination MAC and outer IP address and an egress interface. */
#ifndef DPP_NF_FORWARD_H
#define DPP_NF_FORWARD_H

#include <linux/types.h>

/* Map sizes: groups (dpp_alt_groups), members of a group. */
#ifndef DPP_MAX_ALT_GROUPS
#define DPP_MAX_ALT_GROUPS 64
#endif
#ifndef DPP_MAX_ALT_MEMBERS
#define DPP_MAX_ALT_MEMBERS 8
#endif

/* One member of an alternative node group: where a forwarded packet is rewritten to go. */
struct dpp_alt_member {
	__u8 dmac[6];	  /* new destination MAC */
	__u8 smac[6];	  /* new source MAC; all zero: the packet's old destination MAC */
	__u32 ifindex;	  /* egress interface; 0: the ingress interface (XDP_TX) */
	__u32 has_ip4;	  /* rewrite an IPv4 outer destination to addr4 */
	__u32 addr4;	  /* network order */
	__u32 has_ip6;	  /* rewrite an IPv6 outer destination to addr6 */
	__u32 addr6[4];	  /* network order */
};

/* Value of dpp_alt_groups, indexed by group id. A flow hash picks the member. */
struct dpp_alt_group {
	__u32 count;
	struct dpp_alt_member members[DPP_MAX_ALT_MEMBERS];
};

/* Forwarding's reasons, from DPP_REASON_BASE_FORWARD (dpp/core/consts.h). */
#define DPP_FORWARD_REASONS(X)                                                                   \
	X(FORWARD, NO_ALTERNATIVE, no_alternative, 0) /* no usable alternative group */

#endif /* DPP_NF_FORWARD_H */
