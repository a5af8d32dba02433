/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of forwarding to alternative nodes; the egress ports are redirect's (dpp_ports). */
#ifndef DPP_NF_FORWARD_MAPS_H
#define DPP_NF_FORWARD_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/forward.h"
#include "nf/redirect/maps.h"

/* group id -> alternative nodes */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_ALT_GROUPS);
	__type(key, __u32);
	__type(value, struct dpp_alt_group);
} dpp_alt_groups SEC(".maps");

#endif /* DPP_NF_FORWARD_MAPS_H */
