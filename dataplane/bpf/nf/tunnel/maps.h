/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of a rule's tunnel action; its egress ports are redirect's (dpp_ports). */
#ifndef DPP_NF_TUNNEL_MAPS_H
#define DPP_NF_TUNNEL_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/tunnel.h"
#include "dpp/nf/upf.h"
#include "nf/redirect/maps.h"

/* a TUNNEL rule's arg (a digest of the entry) -> what becomes of its packet (dpp/nf/tunnel.h
 * reads the PDR's members) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_TUNNELS);
	__type(key, __u32);
	__type(value, struct dpp_upf_pdr);
} dpp_tunnels SEC(".maps");

/* 0 -> this CPU's copy of a re-tunnelling entry, the packet's TEID and QFI in it (no room on the
 * stack of the packet's path for one) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_upf_pdr);
} dpp_tunnel_scratch SEC(".maps");

#endif /* DPP_NF_TUNNEL_MAPS_H */
