/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of ATSSS, the MP-DCCP multi-access proxy (bpf/nf/atsss/): a session per UE address naming
 * its paths and steering mode, a path per access (its outer addresses, DCCP ports and sequence
 * number), per-CPU counters per path, and the wire constants of DCCP (RFC 4340) and of the MP_SEQ
 * option of Multipath DCCP (draft-ietf-tsvwg-multipath-dccp, RFC 9897).
 * Mirrored in netapp/atsss/abi.py, checked against BTF by tests/atsss/test_abi.py.
 *
 * Concurrency: a UE's packets arrive on any CPU. What one packet's scheduling changes together (the
 * round-robin cursor, the weighted round-robin's current weights and the connection's MP_SEQ number)
 * is the session's and is changed under the session's bpf_spin_lock: the pick and its MP_SEQ number
 * are one decision, and two CPUs must not both take the same number or both skip a path. A lock is
 * needed, not atomics, because the pick reads and writes several words (the current weights of
 * every path). The path's DCCP sequence number is a single counter, taken with one atomic add
 * (__sync_fetch_and_add) outside the session's lock: a program may hold one lock at a time and no
 * helper may be called under it, and the path lookups are helpers. Whether a path is up, its RTT
 * and addresses are written by the control plane only and read as they are; counters are per CPU. */
#ifndef DPP_NF_ATSSS_H
#define DPP_NF_ATSSS_H

#include <linux/types.h>
#include <linux/bpf.h>

/* Entries of dpp_atsss_sessions (UEs); paths a session may have; slots of dpp_atsss_paths (slot 0:
 * no path), room for every session with all its paths. */
#ifndef DPP_MAX_ATSSS_SESSIONS
#define DPP_MAX_ATSSS_SESSIONS 16384
#endif
#define DPP_ATSSS_MAX_PATHS 4
#ifndef DPP_MAX_ATSSS_PATHS
#define DPP_MAX_ATSSS_PATHS 65536
#endif

/* DCCP (RFC 4340): the IP protocol number; the generic header with 48-bit sequence numbers (X=1,
 * 5.1), which a DCCP-Data packet has alone (5.2, no acknowledgement number); the packet type of
 * DCCP-Data; option type 0, Padding (5.8). */
#define DPP_ATSSS_IPPROTO_DCCP 33
#define DPP_ATSSS_DCCP_HDR_LEN 16
#define DPP_ATSSS_DCCP_TYPE_DATA 2
#define DPP_ATSSS_DCCP_OPT_PADDING 0
#define DPP_ATSSS_DCCP_SEQ_BITS 48
/* Multipath DCCP: the Multipath option's type (46), and its MP_SEQ form (MP_OPT 4): type, length 9,
 * MP_OPT, the connection-level sequence number in 48 bits, network order. DCCP options are padded
 * to a multiple of 4 bytes (RFC 4340 5.8): 3 bytes of Padding after MP_SEQ. */
#define DPP_ATSSS_DCCP_OPT_MULTIPATH 46
#define DPP_ATSSS_MP_SEQ 4
#define DPP_ATSSS_MP_SEQ_LEN 9
#define DPP_ATSSS_OPTIONS_LEN 12

/* enum dpp_atsss_mode: a session's scheduler (TS 29.244's steering modes). */
enum dpp_atsss_mode {
	DPP_ATSSS_ROUND_ROBIN = 0,    /* the paths that are up in turn */
	DPP_ATSSS_WEIGHTED = 1,	      /* load balancing by weight: smooth weighted round-robin */
	DPP_ATSSS_ACTIVE_STANDBY = 2, /* the first path that is up, in the session's order */
	DPP_ATSSS_SMALLEST_DELAY = 3, /* the path up with the smallest RTT (unknown: last; ties: first) */
};

/* enum dpp_atsss_access: the access a path runs over (TS 29.244 ATSSS: 3GPP and non-3GPP). */
enum dpp_atsss_access {
	DPP_ATSSS_ACCESS_THREE_GPP = 0,
	DPP_ATSSS_ACCESS_NON_THREE_GPP = 1,
};

/* enum dpp_atsss_path_flags: struct dpp_atsss_path.flags bits. */
enum dpp_atsss_path_flags {
	DPP_ATSSS_PATH_UP = 1, /* the scheduler may pick it; cleared when the path is reported down */
};

/* Key of dpp_atsss_sessions: the UE's address, family 4 (addr[0], the rest 0) or 6. */
struct dpp_atsss_session_key {
	__u8 family;
	__u8 reserved[3];
	__be32 addr[4];
};

/* Value of dpp_atsss_sessions: a UE's paths, in priority order (active-standby's order), and its
 * scheduler's state, all under lock. The control plane writes it with the state zeroed and
 * mp_seq the first MP_SEQ number to send. */
struct dpp_atsss_session {
	struct bpf_spin_lock lock;
	__u8 mode;    /* enum dpp_atsss_mode */
	__u8 n_paths; /* 1..DPP_ATSSS_MAX_PATHS; 0: no path, packets are passed untouched */
	__u8 next;    /* ROUND_ROBIN: the position to try first */
	__u8 reserved;
	__u16 weight[DPP_ATSSS_MAX_PATHS]; /* WEIGHTED: each position's weight; 0 never picked */
	__s32 current[DPP_ATSSS_MAX_PATHS]; /* WEIGHTED: smooth WRR's current weights */
	__u32 path[DPP_ATSSS_MAX_PATHS];    /* slots of dpp_atsss_paths, by position */
	__u64 mp_seq; /* the next MP_SEQ number (48 bits used) */
};

/* Value of dpp_atsss_paths: one access path of a session, towards the UE's address on that access.
 * Outer header: IPv4 or IPv6 (family) from local to peer, DCCP from sport to dport; Ethernet
 * addresses of the next hop on that access. */
struct dpp_atsss_path {
	__u64 dccp_seq; /* the next DCCP sequence number (48 bits used), atomic */
	__u8 access;	/* enum dpp_atsss_access */
	__u8 family;	/* 4 or 6 */
	__u8 flags;	/* enum dpp_atsss_path_flags */
	__u8 reserved;
	__u32 rtt_us; /* smoothed RTT, fed by the control plane; 0: unknown */
	__be16 sport;
	__be16 dport;
	__u8 smac[6];
	__u8 dmac[6];
	__be32 local[4];
	__be32 peer[4];
};

/* Value of dpp_atsss_path_stats (per CPU), by path slot: what the path sent. */
struct dpp_atsss_path_stats {
	__u64 packets;
	__u64 bytes;
};

#endif /* DPP_NF_ATSSS_H */
