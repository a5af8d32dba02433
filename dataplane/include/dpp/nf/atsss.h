/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of ATSSS, the MP-DCCP multi-access proxy (bpf/nf/atsss/): a session per UE address naming
 * its paths and steering mode, a path per access (its outer addresses, DCCP ports and sequence
 * number, what it sent), per-CPU counters of what each path received, and the wire constants of DCCP (RFC 4340) and of the MP_SEQ
 * option of Multipath DCCP (draft-ietf-tsvwg-multipath-dccp, RFC 9897).
 * Mirrored in netapp/atsss/abi.py, checked against BTF by tests/atsss/test_abi.py.
 *
 * Concurrency: a UE's packets arrive on any CPU. A packet's MP_SEQ number is taken with one atomic
 * add (__sync_fetch_and_add) on the session's counter, and its path's DCCP sequence number with one
 * on the path's: each number is handed out once per session (per path), in increasing order, by
 * whichever CPU comes first. A session's round-robin needs no other state: the packet's own MP_SEQ
 * number says which of the paths up it takes (nf/atsss/schedule.h), so the paths take turns across
 * CPUs as the numbers do; where some of the UE's frames are an MTS session's flows, the others
 * count their own turns (the counter's top 16 bits, below), and each MTS session's flows theirs, by
 * atomic add in the session's flow state (struct dpp_atsss_flow_state). Only weighted round-robin
 * changes several words per packet (the current weight of every path up), and does so under the
 * session's bpf_spin_lock (a flow of an MTS session with its own state: under that state's, struct
 * dpp_atsss_flow_state), which nothing else takes: two CPUs must not read the same current weights
 * and both pick the same path; its MP_SEQ number is taken under that lock by atomic add as well
 * (the control plane changes a session's mode in place, so a packet of the old mode and one of the
 * new may take numbers at once). The lock is the dearest part of a packet's way (it saves and
 * disables interrupts), which is why the other schedulers, whose pick is a function of what the
 * control plane wrote, go without. Whether a path is up, its RTT and addresses are written by the
 * control plane only and read as they are; what a path sent is counted by atomic adds in the path
 * (struct dpp_atsss_path says why), what it received per CPU. The control plane writes the words
 * the data path moves (DCCP and MP_SEQ numbers, what a path sent, WEIGHTED's current weights) only
 * when it creates a path or session; a change stores the other words in place, one aligned store
 * each (netapp/atsss/table.py says in which order, and what a packet meets between them), so that
 * no number is given twice nor any count lost.
 */
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
/* DCCP-Ack and DCCP-DataAck (5.3): the generic header, then the Acknowledgement Number Subheader
 * (with X=1: 16 reserved bits and a 48-bit acknowledgement number). */
#define DPP_ATSSS_DCCP_TYPE_ACK 3
#define DPP_ATSSS_DCCP_TYPE_DATAACK 4
#define DPP_ATSSS_DCCP_ACK_LEN 8
#define DPP_ATSSS_DCCP_OPT_PADDING 0
#define DPP_ATSSS_DCCP_SEQ_BITS 48
/* The outer IP header of the downlink's packets: TTL (IPv6: hop limit) 64; IPv4 with Don't
 * Fragment (path MTU discovery is the UE's to do end to end), ID 0, TOS 0. */
#define DPP_ATSSS_TTL 64
#define DPP_ATSSS_IP_DF 0x4000
/* An IPv4 path's template (struct dpp_atsss_path.head4): Ethernet (14), IPv4 (20) and the DCCP
 * ports (4), 2 bytes of zeros to a whole number of words. */
#define DPP_ATSSS_HEAD4_LEN 40
/* Multipath DCCP: the Multipath option's type (46), and its MP_SEQ form (MP_OPT 4): type, length 9,
 * MP_OPT, the connection-level sequence number in 48 bits, network order. DCCP options are padded
 * to a multiple of 4 bytes (RFC 4340 5.8): 3 bytes of Padding after MP_SEQ. */
#define DPP_ATSSS_DCCP_OPT_MULTIPATH 46
#define DPP_ATSSS_MP_SEQ 4
#define DPP_ATSSS_MP_SEQ_LEN 9
#define DPP_ATSSS_OPTIONS_LEN 12
/* Options an uplink packet may carry at most (single-byte ones, Padding included, count one each):
 * the bound of the parser's loop; more is counted DPP_ATSSS_BAD_OPTIONS. */
#define DPP_ATSSS_MAX_OPTIONS 32
/* The Ack Vector option (RFC 4340 11.4), types 38 and 39 (ECN Nonce 0 and 1): bytes of a state
 * (top 2 bits: 0 received, 1 received ECN-marked, 2 reserved, 3 not yet received) and a run length
 * (low 6 bits: the byte tells run length + 1 numbers), from the packet's acknowledgement number
 * down. The loss estimate (struct dpp_atsss_path_rx) reads at most DPP_ATSSS_ACK_VECTOR_MAX of its
 * bytes, and judges a number once the UE's acknowledgement number is DPP_ATSSS_LOSS_REORDER past it
 * (CCID 2's NUMDUPACK, RFC 4341 6.1: a packet later than that is counted lost). */
#define DPP_ATSSS_DCCP_OPT_ACK_VECTOR0 38
#define DPP_ATSSS_DCCP_OPT_ACK_VECTOR1 39
#define DPP_ATSSS_ACK_VECTOR_MAX 64
#define DPP_ATSSS_LOSS_REORDER 3
/* The ring of the proxy's DCCP-Acks to the UEs (struct dpp_atsss_ack records), and the longest
 * frame a record holds (Ethernet with two VLAN tags, IPv6, DCCP-Ack: 86 bytes). */
#ifndef DPP_ATSSS_ACK_RING_SIZE
#define DPP_ATSSS_ACK_RING_SIZE 262144
#endif
#define DPP_ATSSS_ACK_FRAME_MAX 88
/* Entries of dpp_atsss_tx: the distinct sets of ports REDUNDANT sessions send their copies out of
 * (a session names its set by index, struct dpp_atsss_session.tx_group, a byte). */
#define DPP_ATSSS_TX_GROUPS 256

/* The pipeline's filter of UE addresses (dpp_atsss_ues): a bit per hash of an address, set for
 * every UE with a session, so that a frame to any other address is told apart by one array read
 * instead of a lookup in dpp_atsss_sessions (a hash of the 20-byte key and its bucket). Bits of
 * 64-bit words; the hash of an address is its four words xored, taken as a number in network order,
 * multiplied by the golden ratio's 32 bits, of which the top DPP_ATSSS_UE_FILTER_LOG2 bits are the
 * bit's number: consecutive addresses (a UE pool) spread over the words. With 10,000 UEs a quarter
 * million bits let 4% of other addresses through to the lookup. Mirrored in netapp/atsss/abi.py
 * (ue_filter_bit). */
#define DPP_ATSSS_UE_FILTER_LOG2 18
#define DPP_ATSSS_UE_FILTER_WORDS 4096
#define DPP_ATSSS_UE_FILTER_MULTIPLIER 0x9e3779b1
_Static_assert(DPP_ATSSS_UE_FILTER_WORDS * 64 == 1 << DPP_ATSSS_UE_FILTER_LOG2, "a bit per hash");

/* The index of sessions by UE address (dpp_atsss_index4, dpp_atsss_index6): set-associative
 * buckets of one 64-byte line each, ways holding a UE address whole and the slot of its session in
 * dpp_atsss_slots, found by a multiply and inlined array reads instead of dpp_atsss_sessions' hash
 * of a 20-byte key. An address's bucket is the top DPP_ATSSS_INDEX_LOG2 bits of the UE filter's
 * product (its words xored, in network order, times DPP_ATSSS_UE_FILTER_MULTIPLIER). A session whose
 * bucket has no free way goes to dpp_atsss_sessions, which the data path reads when no way holds the
 * address, until a way of its bucket frees and it is moved in. Slot 0 of dpp_atsss_slots is no
 * session. netapp/atsss/index.py writes them and says in which order (a way is published and
 * retired by its bit of `live`, one byte). */
#define DPP_ATSSS_INDEX_LOG2 13
#define DPP_ATSSS_INDEX_BUCKETS 8192
#define DPP_ATSSS_INDEX4_WAYS 7
#define DPP_ATSSS_INDEX6_WAYS 3
_Static_assert(DPP_ATSSS_INDEX_BUCKETS == 1 << DPP_ATSSS_INDEX_LOG2, "a bucket per hash");

/* Slots of dpp_atsss_flow_state (slot 0: none): the scheduler state of an MEC 015 MTS session's
 * flows, one a session with flow filters in a mode that keeps state (round-robin, weighted), given
 * by the control plane (netapp/atsss/flow_states.py). An ATSSS rule's arg (struct dpp_rule.arg)
 * holds its flows' mode (enum dpp_atsss_mode) in its low DPP_ATSSS_RULE_MODE_BITS and that slot
 * above them. */
#ifndef DPP_MAX_ATSSS_FLOW_STATES
#define DPP_MAX_ATSSS_FLOW_STATES 16384
#endif
#define DPP_ATSSS_RULE_MODE_BITS 8

/* enum dpp_atsss_mode: a session's scheduler (TS 29.244's steering modes). */
enum dpp_atsss_mode {
	DPP_ATSSS_ROUND_ROBIN = 0,    /* the paths that are up in turn */
	DPP_ATSSS_WEIGHTED = 1,	      /* load balancing by weight: smooth weighted round-robin */
	DPP_ATSSS_ACTIVE_STANDBY = 2, /* the first path that is up, in the session's order */
	DPP_ATSSS_SMALLEST_DELAY = 3, /* the path up with the smallest RTT (unknown: last; ties: first) */
	DPP_ATSSS_PRIORITY = 4,	      /* the path up of the highest priority not congested (else: up) */
	DPP_ATSSS_REDUNDANT = 5,      /* every path up, a copy each, all with one MP_SEQ number */
};

/* enum dpp_atsss_uplink_reason: why an uplink packet (outer IP protocol 33) was not taken as
 * MP-DCCP of a known path, and what else the uplink counts, by index of dpp_atsss_uplink_stats. */
enum dpp_atsss_uplink_reason {
	DPP_ATSSS_UP_DECAPSULATED = 0, /* Data or DataAck of a known path: its UE packet went on */
	DPP_ATSSS_UP_ACK = 1,	       /* an Ack of a known path: its state updated, the frame consumed */
	DPP_ATSSS_UP_TRUNC_HEADER = 2, /* shorter than its generic header, or its ack subheader */
	DPP_ATSSS_UP_BAD_HEADER = 3,   /* X=0 (24-bit numbers), a type not Data/Ack/DataAck, doff short */
	DPP_ATSSS_UP_TRUNC_OPTIONS = 4, /* doff reaches past the packet, or an option past doff */
	DPP_ATSSS_UP_BAD_OPTIONS = 5,  /* an option length below 2, MP_SEQ not 9 bytes, too many */
	DPP_ATSSS_UP_BAD_CHECKSUM = 6, /* the DCCP checksum, or a coverage (CsCov) past the packet */
	DPP_ATSSS_UP_UNKNOWN_PATH = 7, /* no path of any session has these addresses and ports */
	DPP_ATSSS_UP_BAD_INNER = 8,    /* Data with no IPv4/IPv6 packet, or not from the UE's address */
	DPP_ATSSS_UP_ACK_LOST = 9,     /* an Ack owed the UE that the ring had no room for */
	DPP_ATSSS_UP_MAX,
};

/* enum dpp_atsss_uplink_flags: struct dpp_atsss_config.flags bits. */
enum dpp_atsss_uplink_flags {
	DPP_ATSSS_DROP_INVALID = 1, /* drop what is not valid MP-DCCP of a known path (else: pass it) */
};

/* enum dpp_atsss_access: the access a path runs over (TS 29.244 ATSSS: 3GPP and non-3GPP). */
enum dpp_atsss_access {
	DPP_ATSSS_ACCESS_THREE_GPP = 0,
	DPP_ATSSS_ACCESS_NON_THREE_GPP = 1,
};

/* enum dpp_atsss_session_flags: struct dpp_atsss_session.flags bits. */
enum dpp_atsss_session_flags {
	/* CsCov 1 (RFC 4340 9.2): the DCCP checksum of the downlink's packets covers their header
	 * and options only, not the UE packet. A receiver takes such packets only when it asked
	 * for partial coverage (its Minimum Checksum Coverage feature 1, 9.2.1: at the default 0,
	 * Linux's DCCP among others drops every packet with CsCov other than 0), so it is the
	 * session's choice; the UE packet keeps its own checksums (IPv4 header, TCP, UDP) and the
	 * link's CRC. Without it CsCov is 0: the whole packet, which every receiver takes. */
	DPP_ATSSS_HEADER_CHECKSUM = 1,
	/* MEC 015 MTS sessions with flow filters select flows of the UE's downlink: the stage looks
	 * its frames up in the classifier (nf/atsss/flows.h), and a rule that matches gives the mode
	 * its flow runs instead of the session's. Without it a frame pays no lookup. */
	DPP_ATSSS_FLOW_RULES = 2,
};

/* enum dpp_atsss_path_flags: struct dpp_atsss_path.flags bits. */
enum dpp_atsss_path_flags {
	DPP_ATSSS_PATH_UP = 1,	      /* the scheduler may pick it; cleared when the path is reported down */
	DPP_ATSSS_PATH_CONGESTED = 2, /* PRIORITY: reported congested, taken only when no other is free */
};

/* Key of dpp_atsss_sessions: the UE's address, family 4 (addr[0], the rest 0) or 6. */
struct dpp_atsss_session_key {
	__u8 family;
	__u8 reserved[3];
	__be32 addr[4];
};

/* Value of dpp_atsss_slots (and of dpp_atsss_sessions): a UE's paths, in priority order (active-standby's order), and its
 * scheduler's state (WEIGHTED's under the lock, the MP_SEQ counter atomic). The control plane
 * writes a new one with the state zeroed and mp_seq the first MP_SEQ number to send; a changed one
 * of dpp_atsss_slots in place, the lock, current and mp_seq left to the data path. */
struct dpp_atsss_session {
	struct bpf_spin_lock lock; /* WEIGHTED's current weights */
	__u8 mode;    /* enum dpp_atsss_mode */
	__u8 n_paths; /* 1..DPP_ATSSS_MAX_PATHS; 0: no path, packets are passed untouched */
	__u8 flags;   /* enum dpp_atsss_session_flags */
	__u8 tx_group; /* REDUNDANT: the entry of dpp_atsss_tx whose ports its copies leave by */
	__u16 weight[DPP_ATSSS_MAX_PATHS]; /* WEIGHTED: each position's weight; 0 never picked */
	__s32 current[DPP_ATSSS_MAX_PATHS]; /* WEIGHTED: smooth WRR's current weights */
	__u32 path[DPP_ATSSS_MAX_PATHS];    /* slots of dpp_atsss_paths, by position */
	__u8 priority[DPP_ATSSS_MAX_PATHS]; /* PRIORITY: each position's, 0 the highest; ties: first */
	/* REDUNDANT: the positions whose path is up, as bits, kept with the paths' up flags by the
	 * control plane, so that the marking reads no path's line (the copies read their own) */
	__u8 up;
	__u8 reserved[3];
	/* the next MP_SEQ number in the low 48 bits: atomic, WEIGHTED's under a lock; with
	 * DPP_ATSSS_FLOW_RULES the top 16 count the turns of the round-robin frames no MTS session's
	 * flow state takes (nf/atsss/schedule.h) */
	__u64 mp_seq;
};

/* Value of dpp_atsss_flow_state: the scheduler state of one MTS session's flows (the frames its
 * rules match), beside the session's own (struct dpp_atsss_session), whose paths, weights and MP_SEQ
 * counter they use: WEIGHTED's running weights under the state's lock, ROUND_ROBIN's turns by atomic
 * add (nf/atsss/flows.h argues where it lives and what guards it). Zeroed by the control plane when
 * it gives the slot to an MTS session, with the value's lock held (BPF_F_LOCK), before the session's
 * rules name it (netapp/atsss/flow_states.py). One line. */
struct dpp_atsss_flow_state {
	struct bpf_spin_lock lock;	    /* current[] */
	__s32 current[DPP_ATSSS_MAX_PATHS]; /* WEIGHTED: smooth WRR's current weights of these flows */
	__u32 reserved;
	__u64 turns; /* ROUND_ROBIN: these flows' turns, atomic */
	__u64 reserved2[4];
};

_Static_assert(sizeof(struct dpp_atsss_flow_state) == 64, "a flow state is one line");

/* The data of a run of dpp_atsss_session_set (nf/atsss/words.h): the words of a session the
 * control plane owns, stored in place, the lock, current and mp_seq left as packets move them. */
struct dpp_atsss_session_words {
	struct dpp_atsss_session_key key; /* the session of dpp_atsss_sessions, when slot is 0 */
	__u32 slot;	/* of dpp_atsss_slots; 0: the session by key */
	__u32 control;	/* the session's mode, n_paths, flags, tx_group, as they lie in memory */
	__u32 fewer;	/* nonzero: the control word stored first (n_paths shrinks), else last */
	__u64 weight;	/* weight[] as it lies in memory */
	__u64 path[2];	/* path[] */
	__u64 priority; /* priority[], up and reserved[] */
};

_Static_assert(sizeof(struct dpp_atsss_session_words) == 64, "a run's data: one line, past XDP's 14-byte minimum");

/* Value of dpp_atsss_index4: a bucket of IPv4 UEs. Way i holds addr[i] and its session's slot
 * when bit i of live is set; its address and slot are written only while the bit is clear. */
struct dpp_atsss_index4 {
	__be32 addr[DPP_ATSSS_INDEX4_WAYS];
	__u32 slot[DPP_ATSSS_INDEX4_WAYS];
	__u8 live;
	__u8 reserved[7];
};

/* Value of dpp_atsss_index6: a bucket of IPv6 UEs, as dpp_atsss_index4's. */
struct dpp_atsss_index6 {
	__be32 addr[DPP_ATSSS_INDEX6_WAYS][4];
	__u32 slot[DPP_ATSSS_INDEX6_WAYS];
	__u8 live;
	__u8 reserved[3];
};

_Static_assert(sizeof(struct dpp_atsss_index4) == 64 && sizeof(struct dpp_atsss_index6) == 64,
	       "a bucket is one cache line");

/* Value of dpp_atsss_paths: one access path of a session, towards the UE's address on that access.
 * Outer header: IPv4 or IPv6 (family) from local to peer, DCCP from sport to dport; Ethernet
 * addresses of the next hop on that access. Two 64-byte lines (the map is mmapable, so a value
 * starts a line): the first all the downlink reads to send (and the DCCP number it takes), the
 * second what the path sent, moved by atomic adds, and an IPv4 path's outer headers ready to copy
 * (read on the same line: a template costs the packet no line). The counters are not per CPU: a
 * per-CPU slot is two more lines a packet fetches one after the other (the slot's pointer, then
 * this CPU's value), where these share the line pair the packet's path is read from
 * (bench/README.md, ATSSS, "the path's counters in its own lines"). The control plane writes a
 * new path whole, its template built (netapp/atsss/head4.py), before any session leads to it; a
 * changed one only in its own words, in place through the map's mmap, never dccp_seq, packets or
 * bytes (netapp/atsss/table.py): a packet sent meanwhile keeps its number and its count. */
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
	/* the second line: the downlink's UE packets sent on the path and their bytes (atomic), */
	__u64 packets;
	__u64 bytes;
	/* then an IPv4 path's outer headers as the control plane builds them from the fields above
	 * (family 6: zeros): Ethernet to the next hop, IPv4 (protocol DCCP, DPP_ATSSS_TTL,
	 * DPP_ATSSS_IP_DF) with total length and checksum 0, the DCCP ports; the IPv4 header's words
	 * summed (one's complement, folded to 16 bits: its checksum is that sum plus the length's,
	 * complemented); the DCCP checksum's part of the addresses and ports, folded likewise. The
	 * downlink copies the headers in a few 8-byte stores and patches the length and checksum. */
	__u8 head4[DPP_ATSSS_HEAD4_LEN];
	__u32 head4_dccp_sum;
	__u16 head4_ip_sum;
	__u16 reserved2;
};

_Static_assert(sizeof(struct dpp_atsss_path) == 128 && __builtin_offsetof(struct dpp_atsss_path, packets) == 64,
	       "a path is two lines: what the downlink reads, then its counters and IPv4 template");
_Static_assert(__builtin_offsetof(struct dpp_atsss_path, head4) % 8 == 0, "the template is read as 8-byte words");

/* Value of dpp_atsss_path_stats (per CPU), by path slot: what the path received (uplink UE packets
 * decapsulated and their bytes; Acks). What it sent is counted in the path (struct dpp_atsss_path). */
struct dpp_atsss_path_stats {
	__u64 rx_packets;
	__u64 rx_bytes;
	__u64 rx_acks;
};

/* Key of dpp_atsss_uplink: an uplink packet's outer addresses and DCCP ports, as they arrive: from
 * the UE's address on the access (a path's peer, its dport) to ours (the path's local, its sport). */
struct dpp_atsss_uplink_key {
	__u8 family;
	__u8 reserved;
	__be16 sport; /* the UE's port: the path's dport */
	__be16 dport; /* ours: the path's sport */
	__u16 reserved2;
	__be32 peer[4];
	__be32 local[4];
};

/* Value of dpp_atsss_uplink: the path the packet came by, and the UE address its session is for,
 * which the packets it carries must come from (a UE sends only as itself). */
struct dpp_atsss_uplink {
	__u32 path;    /* slot of dpp_atsss_paths */
	__u8 family;   /* of ue: 4 or 6 */
	__u8 reserved[3];
	__be32 ue[4];
};

/* Value of dpp_atsss_path_rx, by path slot: what the path heard from the UE, written by the uplink
 * only (the control plane reads it, and zeroes it with the path). Numbers are 48-bit DCCP sequence
 * numbers compared modulo 2^48 (RFC 4340 7.1); each moves only forward, by compare-and-swap, so two
 * CPUs' packets leave the greater.
 *
 * The path's loss, from the Ack Vectors of the UE's Acks and DataAcks (CCID 2 has the receiver send
 * them, RFC 4341 3): every number of ours the UE's vectors reported, judged once, counted delivered
 * (states 0, 1) or lost (state 3), each number at most once. loss_mark is the greatest number
 * judged (DPP_ATSSS_LOSS_MARKED set once the first Ack with a vector fixed it): an Ack acknowledging
 * A judges the numbers after the mark up to A - DPP_ATSSS_LOSS_REORDER, which the CPU that moves
 * the mark there (compare-and-swap) counts from the Ack's vector; numbers its vector does not reach
 * (Acks lost on the way, a vector longer than the parser reads) are counted neither way. Bounds:
 * a packet the UE got more than DPP_ATSSS_LOSS_REORDER numbers late is counted lost; a lost Ack
 * loses nothing while a later vector still reports its numbers; the proxy's own Acks are numbers of
 * the path too, and count like its Data. The control plane takes the loss of a window as the
 * growth of lost over that of delivered + lost between two reads. */
struct dpp_atsss_path_rx {
	__u64 gsr;	     /* Greatest Sequence number Received from the UE (valid once heard) */
	__u64 gar;	     /* Greatest Acknowledgement number Received: the highest of ours acked */
	__u64 last_heard_ns; /* bpf_ktime_get_ns() of the last valid packet; 0: never heard */
	__u64 unacked;	     /* Data packets received, counted for the Ack ratio (atomic add) */
	__u64 loss_mark;     /* DPP_ATSSS_LOSS_MARKED | the greatest number judged; 0: none yet */
	__u64 delivered;     /* numbers of ours the UE reported received (atomic add) */
	__u64 lost;	     /* numbers of ours the UE reported not received (atomic add) */
};

/* loss_mark's bit that says it holds a number (a 48-bit number may be 0). */
#define DPP_ATSSS_LOSS_MARKED 0x8000000000000000 /* unsigned long long: 2^63 */

/* Value of dpp_atsss_config[0]: the node's uplink settings. Zeroed: invalid packets pass, every
 * Data packet acknowledged. */
struct dpp_atsss_config {
	__u32 flags;	 /* enum dpp_atsss_uplink_flags */
	__u32 ack_ratio; /* Data packets per DCCP-Ack to the UE (RFC 4341 Ack Ratio); 0 or 1: every */
};

/* A record of the ring dpp_atsss_acks: a DCCP-Ack the proxy owes the UE, the frame whole and
 * ready to leave by ifindex (the interface its Data came in on), back towards the UE. */
struct dpp_atsss_ack {
	__u32 ifindex;
	__u32 len;
	__u8 frame[DPP_ATSSS_ACK_FRAME_MAX];
};

#endif /* DPP_NF_ATSSS_H */
