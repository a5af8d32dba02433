/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of FRER: the sequence recovery functions by stream handle (read with BPF_F_LOCK) and
 * what each CPU counted for them, the streams, their identification, each generated stream's group
 * of ports, per-port counters. */
#ifndef DPP_NF_FRER_MAPS_H
#define DPP_NF_FRER_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/core/structs.h"
#include "dpp/nf/frer.h"

/* stream handle -> its recovery function: parameters, state and counters under one lock (shared
 * by the CPUs: frames of one stream arrive on any of them, one per path at least). Mmapable only so
 * that the values start page-aligned: each slot's first line is then the one its frames touch. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_FRER_STREAMS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct dpp_frer_recovery);
} dpp_frer_recovery SEC(".maps");

/* stream handle -> the frames this CPU passed and discarded without the slot's lock (a duplicate
 * then writes nothing another CPU reads, a frame in order only the state word); the slot counts
 * the rest */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_MAX_FRER_STREAMS);
	__type(key, __u32);
	__type(value, struct dpp_frer_cpu_counts);
} dpp_frer_cpu_counts SEC(".maps");

/* stream handle -> this node's part in it (GENERATE: its sequence counter) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_FRER_STREAMS);
	__type(key, __u32);
	__type(value, struct dpp_frer_stream);
} dpp_frer_streams SEC(".maps");

/* null stream identification: destination MAC and VLAN id -> stream handle */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_FRER_IDENTITIES);
	__type(key, struct dpp_frer_null_key);
	__type(value, __u32);
} dpp_frer_null SEC(".maps");

/* IP stream identification: VLAN, addresses, DSCP, protocol and ports, masked by one of
 * dpp_frer_ip_masks (whose slot + 1 the key holds in .shape) -> stream handle */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_FRER_IDENTITIES);
	__type(key, struct dpp_flow_key);
	__type(value, __u32);
} dpp_frer_ip SEC(".maps");

/* slot -> a mask of the fields IP stream identities compare (the parameters they leave out are 0
 * in it, an address prefix its leading bits), .shape its slot + 1; tried in slot order, the most
 * specific first; the first slot whose mask has .family 0 ends the list */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_FRER_IP_MASKS);
	__type(key, __u32);
	__type(value, struct dpp_flow_key);
} dpp_frer_ip_masks SEC(".maps");

/* (stream, egress port) -> the VLAN its copies carry there; a port not listed for a stream gets no
 * copy of it */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_FRER_IDENTITIES);
	__type(key, struct dpp_frer_member_key);
	__type(value, struct dpp_frer_member);
} dpp_frer_members SEC(".maps");

/* A group of ports (an inner map of dpp_frer_tx): ifindex -> a member port its streams' frames are
 * copied to, with the egress program (dpp_frer_egress) where the port wants a VLAN id. A hash, not
 * an array: a broadcast visits every slot of a DEVMAP, used or not, and empty slots cost a frame
 * more than FRER's own work does (bench/frer/replicate.py). */
struct dpp_frer_tx_group {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, DPP_MAX_FRER_PORTS);
	/* sizes, not types: a type reached only through the outer map's pointer is not in the BTF */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct bpf_devmap_val));
};

/* group (a GENERATE stream's tx_group) -> its member ports: one group per distinct set of ports,
 * shared by the streams that name it (a hot group for many streams, measured: a group per stream
 * made 4,095 cold streams 40 ns dearer). A frame is broadcast to its stream's ports only, so no
 * port of another stream (another tenant's) is handed a copy, and the cost stays that of the
 * stream's copies however many ports the node's streams replicate to. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, DPP_MAX_FRER_STREAMS);
	__type(key, __u32);
	__array(values, struct dpp_frer_tx_group);
} dpp_frer_tx SEC(".maps");

/* ingress ifindex -> its per-port counters on this CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, DPP_MAX_FRER_PORTS);
	__type(key, __u32);
	__type(value, struct dpp_frer_port_stats);
} dpp_frer_port_stats SEC(".maps");

/* 0 -> the kinds of stream identification the node has entries for (enum dpp_frer_gate); nonzero:
 * the pipeline hands frames to FRER's stage (dpp_frer_stage) before it parses them. libdpp sets
 * DPP_FUNCTION_FRER in dpp_config.functions while it is nonzero (src/functions.c). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} dpp_frer_gate SEC(".maps");

/* 0 -> set by FRER's stage on this CPU when it hands a frame on to the pipeline's entry, which
 * then runs it without the stage (cleared there): the two run back to back on one CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} dpp_frer_onward SEC(".maps");

#endif /* DPP_NF_FRER_MAPS_H */
