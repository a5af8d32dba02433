/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of duplicating packets (bpf/nf/duplicate/): a DUPLICATE rule's arg names its copy group,
 * the set of interfaces a matching packet leaves by, one copy each. The control plane names a
 * group by its interfaces (netapp/duplicate/), writes the group's interfaces as its entry of
 * dpp_dup_tx (a DEVMAP of its own) before the rules that name it, and removes the entry when no rule
 * uses the group any more. */
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

#endif /* DPP_NF_DUPLICATE_H */
