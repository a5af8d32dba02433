/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of duplicating packets: the interfaces copies may leave by, and each group's members. */
#ifndef DPP_NF_DUPLICATE_MAPS_H
#define DPP_NF_DUPLICATE_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/duplicate.h"

/* ifindex -> that interface with the egress program that keeps a group's copies (dpp_dup_egress):
 * every interface of every group in use; a DUPLICATE packet is broadcast to all of them */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, DPP_MAX_DUP_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} dpp_dup_tx SEC(".maps");

/* (group, egress ifindex) -> present when the group's packets get a copy out of that interface */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_DUP_GROUPS * DPP_MAX_DUP_COPIES);
	__type(key, struct dpp_dup_member_key);
	__type(value, struct dpp_dup_member);
} dpp_dup_members SEC(".maps");

#endif /* DPP_NF_DUPLICATE_MAPS_H */
