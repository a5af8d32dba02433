/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The map of duplicating packets: each copy group's interfaces, a DEVMAP group of its own. */
#ifndef DPP_NF_DUPLICATE_MAPS_H
#define DPP_NF_DUPLICATE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/duplicate.h"

/* A copy group (an inner map of dpp_dup_tx): position -> an interface the group's packets get a
 * copy out of, as they came (no devmap program). Every entry gets a copy of each packet broadcast
 * to the group. */
struct dpp_dup_group {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, DPP_MAX_DUP_COPIES);
	/* sizes, not types: a type reached only through the outer map's pointer is not in the BTF */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct bpf_devmap_val));
};

/* group id (a DUPLICATE rule's arg) -> its interfaces: one group per distinct set of interfaces
 * the rules duplicate to, shared by the rules that name it, so a packet is copied to its own
 * group's interfaces only, whatever other rules (other tenants') duplicate to. A hash: the id is
 * a hash of the interfaces (netapp/duplicate/compiler.py), stable over restarts. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, DPP_MAX_DUP_GROUPS);
	__type(key, __u32);
	__array(values, struct dpp_dup_group);
} dpp_dup_tx SEC(".maps");

#endif /* DPP_NF_DUPLICATE_MAPS_H */
