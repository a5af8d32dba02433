/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of the user plane function: interface roles, the PDR tables of each direction, the
 * URRs' usage (written by netapp/upf/applier.py as generic tables), the route cache of the
 * forwarded packets (its generation written by netapp/upf/nexthop.py), and the ring of the frames
 * handed to user space (BUFF, DUPL). */
#ifndef DPP_NF_UPF_MAPS_H
#define DPP_NF_UPF_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/upf.h"

/* ifindex % DPP_MAX_UPF_IFACES -> the interface's role and addresses (direct-mapped: an array
 * lookup the verifier inlines, paid by every packet; the value names its ifindex) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_UPF_IFACES);
	__type(key, __u32);
	__type(value, struct dpp_upf_iface);
} dpp_upf_ifaces SEC(".maps");

/* local TEID -> its own uplink PDR's action (DPP_UPF_QFI_ANY's), for the TEIDs below the map's size
 * (those the UPF chooses): one cache line, and an empty slot (no DPP_UPF_PDR_ENTRY) is a miss
 * without a second lookup. Mmapable only so that the values start page-aligned: a 64-byte value is
 * then exactly a line. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_UPF_TEIDS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_upf_pdr);
} dpp_upf_teids SEC(".maps");

/* (local TEID, QFI or DPP_UPF_QFI_ANY) -> the uplink PDR's action: TEIDs past dpp_upf_teids, and the
 * entries by QFI */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_UPF_PDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct dpp_upf_ul_key);
	__type(value, struct dpp_upf_pdr);
} dpp_upf_uplink SEC(".maps");

/* 0 -> whether dpp_upf_uplink may hold TEIDs' own entries (the TEIDs the UPF does not choose):
 * without any (the usual case) a TEID past dpp_upf_teids is a miss without a hash lookup */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_upf_uplink_state);
} dpp_upf_uplink_state SEC(".maps");

/* (network instance, family, UE address) -> the downlink PDR's action: IPv6 addresses, and the IPv4
 * addresses the SMF gave whose bucket of dpp_upf_dl4 was full */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_UPF_PDRS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct dpp_upf_dl_key);
	__type(value, struct dpp_upf_pdr);
} dpp_upf_downlink SEC(".maps");

/* slot (a pool's first slot + the UE address's offset in it, struct dpp_upf_iface.ue4_*) -> the
 * downlink PDR's action of a UE address of a pool the UPF assigns from: an inlined array lookup, one
 * line; an empty slot (no DPP_UPF_PDR_ENTRY) is a miss without a second lookup. Mmapable for
 * page-aligned values, as dpp_upf_teids. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_UPF_UE4);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_upf_pdr);
} dpp_upf_ue4 SEC(".maps");

/* slot (a bucket's first slot, bucket * DPP_UPF_DL4_WAYS, + a way) -> the downlink PDR's action of a
 * UE IPv4 address the SMF gave, the address in ue_addr (set-associative: the bucket is a hash of the
 * address and the network instance; an inlined array lookup a way, one line each; an address its
 * bucket lacks is in dpp_upf_downlink, if dpp_upf_downlink_state says it may be there). Written by
 * netapp/upf/ways.py: a way is published and retired by its DPP_UPF_PDR_ENTRY bit alone, and
 * rewritten only once no program can still be reading it (the order is argued there). Mmapable
 * for page-aligned values, as dpp_upf_teids. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_UPF_DL4);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_upf_pdr);
} dpp_upf_dl4 SEC(".maps");

/* 0 -> whether dpp_upf_downlink may hold IPv4 entries (those whose bucket of dpp_upf_dl4 was full):
 * without any (the usual case) an IPv4 address dpp_upf_dl4 lacks is a miss without a hash lookup */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_upf_downlink_state);
} dpp_upf_downlink_state SEC(".maps");

/* slot (a UPF rule's arg, dpp_rules) -> the action of a PDR with SDF filters */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_UPF_SDF_PDRS);
	__type(key, __u32);
	__type(value, struct dpp_upf_pdr);
} dpp_upf_sdf_pdrs SEC(".maps");

/* URR slot -> the UE packets' volume each way (shared by the CPUs, added to atomically; mmapable
 * for page-aligned values, two slots a line) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_UPF_URRS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_upf_usage);
} dpp_upf_usage SEC(".maps");

/* slot (hash of the destination) -> a FIB answer of this CPU, valid under its generation */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_UPF_ROUTE_SLOTS);
	__type(key, __u32);
	__type(value, struct dpp_upf_route);
} dpp_upf_routes SEC(".maps");

/* 0 -> this CPU's room for a forwarded packet's next hop lookup (nf/upf/output.h): its 64 bytes
 * off the stack, which the entry, with the UPF inlined in it, shares with the calls below it */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_fib_lookup);
} dpp_upf_next_hop_room SEC(".maps");

/* 0 -> this CPU's room for a downlink hash lookup's key (nf/upf/upf.h): its 24 bytes off the stack
 * of the entry and of dpp_upf_sdf, the UPF inlined in both, whose frames start the longest chains */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_upf_dl_key);
} dpp_upf_dl_key_room SEC(".maps");

/* 0 -> the route cache's generation: the control plane bumps it when routes or neighbours change;
 * 0 (nobody watches them) turns the cache off */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_upf_route_gen);
} dpp_upf_route_gen SEC(".maps");

/* frames of PDRs whose FAR buffers (BUFF) or duplicates (DUPL), as struct dpp_upf_punt records, for
 * user space (libdpp's dpp_upf_punts_*, netapp/upf/buffering.py) */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DPP_UPF_PUNT_RING_SIZE);
} dpp_upf_punt SEC(".maps");

#endif /* DPP_NF_UPF_MAPS_H */
