/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of duplicating packets (bpf/nf/duplicate/): a DUPLICATE rule's arg names its copy group,
 * the set of interfaces a matching packet leaves by, one copy each. The control plane names a
 * group by its interfaces (netapp/duplicate/), writes its members in dpp_dup_members and its
 * interfaces in dpp_dup_tx, and removes both when no rule uses the group any more. */
#ifndef DPP_NF_DUPLICATE_H
#define DPP_NF_DUPLICATE_H

#include <linux/types.h>

/* Map sizes: groups in use at once, interfaces per group (copies of a packet), interfaces. */
#ifndef DPP_MAX_DUP_GROUPS
#define DPP_MAX_DUP_GROUPS 256
#endif
#ifndef DPP_MAX_DUP_COPIES
#define DPP_MAX_DUP_COPIES 8
#endif
#ifndef DPP_MAX_DUP_PORTS
#define DPP_MAX_DUP_PORTS 64
#endif

/* Key and value of dpp_dup_members: an interface of a group, which gets a copy of its packets. */
struct dpp_dup_member_key {
	__u32 group;
	__u32 ifindex;
};

struct dpp_dup_member {
	__u32 reserved;
};

#endif /* DPP_NF_DUPLICATE_H */
