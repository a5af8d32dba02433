/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of ATSSS: sessions by UE address (their scheduler state under the session's lock), the
 * paths by slot (with what each sent), per-CPU counters of what each received; for the uplink, the paths by the addresses and ports
 * their packets arrive with, what each path heard from its UE, the node's uplink settings and
 * counters, and the ring of the Acks owed the UEs; the gate of the pipeline's ATSSS stage. */
#ifndef DPP_NF_ATSSS_MAPS_H
#define DPP_NF_ATSSS_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"

/* UE address -> its session: paths, steering mode, scheduler state and MP_SEQ counter under one
 * lock (a UE's packets arrive on any CPU); the sessions whose bucket of the index was full */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_ATSSS_SESSIONS);
	__type(key, struct dpp_atsss_session_key);
	__type(value, struct dpp_atsss_session);
} dpp_atsss_sessions SEC(".maps");

/* slot -> a session the index leads to (slot 0: none); mmapable so that its values start on a
 * page, each 64-byte session one line (a plain array's start 56 bytes into one: two lines) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_SESSIONS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_atsss_session);
} dpp_atsss_slots SEC(".maps");

/* bucket -> IPv4 UE addresses and their sessions' slots (include/dpp/nf/atsss.h, the index);
 * mmapable so that its values start on a page, each bucket one line */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_ATSSS_INDEX_BUCKETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_atsss_index4);
} dpp_atsss_index4 SEC(".maps");

/* bucket -> IPv6 UE addresses and their sessions' slots */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_ATSSS_INDEX_BUCKETS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_atsss_index6);
} dpp_atsss_index6 SEC(".maps");

/* path slot -> the path: access, outer addresses, DCCP ports and sequence number, up or down, what
 * it sent; mmapable so that its values start on a page, each path a pair of lines (a plain array's
 * start 56 bytes into one: three) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_PATHS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_atsss_path);
} dpp_atsss_paths SEC(".maps");

/* path slot -> what it received on this CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_PATHS);
	__type(key, __u32);
	__type(value, struct dpp_atsss_path_stats);
} dpp_atsss_path_stats SEC(".maps");

/* outer addresses and DCCP ports of an uplink packet -> its path and the UE it is for */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_ATSSS_PATHS);
	__type(key, struct dpp_atsss_uplink_key);
	__type(value, struct dpp_atsss_uplink);
} dpp_atsss_uplink SEC(".maps");

/* path slot -> what the path heard from the UE (greatest numbers received, last heard) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_PATHS);
	__type(key, __u32);
	__type(value, struct dpp_atsss_path_rx);
} dpp_atsss_path_rx SEC(".maps");

/* enum dpp_atsss_uplink_reason -> uplink packets of that outcome on this CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_ATSSS_UP_MAX);
	__type(key, __u32);
	__type(value, __u64);
} dpp_atsss_uplink_stats SEC(".maps");

/* 0 -> the node's uplink settings */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dpp_atsss_config);
} dpp_atsss_config SEC(".maps");

/* the DCCP-Acks owed the UEs, whole frames (struct dpp_atsss_ack) for user space to send */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DPP_ATSSS_ACK_RING_SIZE);
} dpp_atsss_acks SEC(".maps");

/* A group of ports (an inner map of dpp_atsss_tx): position -> the interface a REDUNDANT session's
 * copy for its path at that position leaves by, and the devmap program that encapsulates it for
 * that path (dpp_atsss_copy_<position>). Every entry gets a copy of each packet broadcast to the
 * group (BPF_F_BROADCAST). */
struct dpp_atsss_tx_group {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, DPP_ATSSS_MAX_PATHS);
	/* sizes, not types: a type reached only through the outer map's pointer is not in the BTF */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct bpf_devmap_val));
};

/* group -> its ports: one group per distinct set of ports the REDUNDANT sessions use, shared by the
 * sessions that name it (tx_group), so that a session's copies leave by its own paths' interfaces
 * only, whatever other sessions (other tenants') use. The control plane gives a group a new inner
 * map whole when its ports change, and empties the entries no session names. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, DPP_ATSSS_TX_GROUPS);
	__type(key, __u32);
	__array(values, struct dpp_atsss_tx_group);
} dpp_atsss_tx SEC(".maps");

/* 0 -> nonzero when the node has ATSSS sessions: the pipeline then hands ATSSS's frames (DCCP, and
 * plain IP to a UE with a session) to its stage (nf/atsss/stage.h). Written by the control plane
 * with the sessions; libdpp sets DPP_FUNCTION_ATSSS in dpp_config.functions while it is nonzero. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} dpp_atsss_gate SEC(".maps");

/* word -> bits of the hashes of UE addresses with a session (include/dpp/nf/atsss.h, the UE
 * filter): a bit clear says no session has that address. The control plane sets a session's bit
 * before it writes the session and clears it once no session left has it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_ATSSS_UE_FILTER_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} dpp_atsss_ues SEC(".maps");

#endif /* DPP_NF_ATSSS_MAPS_H */
