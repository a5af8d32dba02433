/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of ATSSS: sessions by UE address (their scheduler state under the session's lock), the
 * paths by slot, per-CPU counters per path. */
#ifndef DPP_NF_ATSSS_MAPS_H
#define DPP_NF_ATSSS_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"

/* UE address -> its session: paths, steering mode, scheduler state and MP_SEQ counter under one
 * lock (a UE's packets arrive on any CPU) */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DPP_MAX_ATSSS_SESSIONS);
	__type(key, struct dpp_atsss_session_key);
	__type(value, struct dpp_atsss_session);
} dpp_atsss_sessions SEC(".maps");

/* path slot -> the path: access, outer addresses, DCCP ports and sequence number, up or down */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_PATHS);
	__type(key, __u32);
	__type(value, struct dpp_atsss_path);
} dpp_atsss_paths SEC(".maps");

/* path slot -> what it sent on this CPU */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DPP_MAX_ATSSS_PATHS);
	__type(key, __u32);
	__type(value, struct dpp_atsss_path_stats);
} dpp_atsss_path_stats SEC(".maps");

#endif /* DPP_NF_ATSSS_MAPS_H */
