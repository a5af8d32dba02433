/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of duplicating packets (bpf/nf/duplicate/): a DUPLICATE rule's arg names its copy group,
 * the set of interfaces a matching packet leaves by, one copy each. The control plane names a
 * group by its interfaces (netapp/duplicate/), writes the group's interfaces as its entry of
 * dpp_dup_tx (a DEVMAP of its own) before the rules that name it, and removes the entry when no rule
 * uses the group any more.
 *
 * A port of a group may decapsulate its copies (MEC 011 DUPLICATE_DECAPSULATED: the application's
 * copy leaves without its tunnel, the others as the packet came): its DEVMAP entry runs the egress
 * program dpp_dup_decap, which removes a GTP-U packet's headers up to and including GTP-U (the
 * UPF's outer header removal, bpf/nf/upf/decap.h) from its copy only. The id of such a group has
 * DPP_DUP_GROUP_DECAP set, so the stage knows, without a lookup, to give each frame the struct
 * dpp_dup_meta the egress program reads (XDP metadata, which the broadcast copies with the frame);
 * the frames of other groups carry none. */
#ifndef DPP_NF_DUPLICATE_H
#define DPP_NF_DUPLICATE_H

#include <linux/types.h>

/* Map sizes: groups in use at once, interfaces per group (copies of a packet). */
#ifndef DPP_MAX_DUP_GROUPS
#define DPP_MAX_DUP_GROUPS 256
#endif
#ifndef DPP_MAX_DUP_COPIES
#define DPP_MAX_DUP_COPIES 8
#endif

/* The bit of a group id that says a port of the group decapsulates its copies (ids are below it
 * otherwise: netapp/duplicate/compiler.py). */
#define DPP_DUP_GROUP_DECAP 0x40000000

/* What each frame of a decapsulating group carries to the egress program, in front of its data. */
struct dpp_dup_meta {
	__u16 ue_off; /* a GTP-U T-PDU's UE packet's offset (after every extension header); 0: no GTP-U */
	__u8 family;  /* the UE packet's IP version, 4 or 6; 0: a T-PDU whose payload is not IP */
	__u8 pad;
};

#endif /* DPP_NF_DUPLICATE_H */
