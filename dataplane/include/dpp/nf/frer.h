/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of FRER, IEEE 802.1CB frame replication and elimination (bpf/nf/frer/): the R-tag, and
 * the sequence recovery functions, one slot of dpp_frer_recovery by stream handle, each holding its
 * parameters (802.1CB 10.4.1), its state (7.4.3.2) and its counters (10.8) under one lock.
 * Mirrored in netapp/frer/abi.py, checked against BTF by tests/frer/test_abi.py. */
#ifndef DPP_NF_FRER_H
#define DPP_NF_FRER_H

#include <linux/types.h>
#include <linux/bpf.h>

/* Slots of dpp_frer_recovery and dpp_frer_streams (slot 0: no stream), and of dpp_frer_tx (a group
 * per distinct set of member ports); entries of the stream identification tables and of the ports'
 * membership; the FRER ports of a node (those of its groups, those dpp_frer_port_stats counts). */
#ifndef DPP_MAX_FRER_STREAMS
#define DPP_MAX_FRER_STREAMS 4096
#endif
#ifndef DPP_MAX_FRER_IDENTITIES
#define DPP_MAX_FRER_IDENTITIES 16384
#endif
#ifndef DPP_MAX_FRER_PORTS
#define DPP_MAX_FRER_PORTS 64
#endif
/* Slots of dpp_frer_ip_masks: the distinct sets of fields the node's IP stream identities compare
 * (each a lookup of a frame that matches none). */
#define DPP_FRER_IP_MASKS 8

/* The R-tag (802.1CB 7.8): EtherType, then reserved (16 bits), sequence number (16 bits) and the
 * EtherType of what it carries; sequence numbers wrap at 2^16 (RecovSeqSpace). */
#define DPP_FRER_RTAG_ETHERTYPE 0xF1C1
#define DPP_FRER_RTAG_LEN 6 /* after its EtherType: reserved, sequence number, next EtherType */
#define DPP_FRER_SEQ_SPACE 65536
/* frerSeqRcvyHistoryLength: the vector algorithm's history, in sequence numbers (the standard's
 * YANG defaults to 2); a history is one 32-bit word. */
#define DPP_FRER_HISTORY_MIN 2
#define DPP_FRER_HISTORY_MAX 32
#define DPP_FRER_HISTORY_DEFAULT 2

/* The VLAN id of a null identity that gives none: frames of any VLAN, tagged or not (802.1CB's
 * tagged "all"), looked up after the frame's own VLAN. Not a VLAN id (12 bits). */
#define DPP_FRER_VLAN_ANY 0xffff

/* enum dpp_frer_algo: frerSeqRcvyAlgorithm. */
enum dpp_frer_algo {
	DPP_FRER_ALGO_VECTOR = 0, /* 7.4.3.4: a history of the last history_len sequence numbers */
	DPP_FRER_ALGO_MATCH = 1,  /* 7.4.3.5: only the last sequence number */
};

/* enum dpp_frer_flags: struct dpp_frer_recovery.flags bits. */
enum dpp_frer_flags {
	DPP_FRER_INDIVIDUAL = 1,       /* frerSeqRcvyIndividualRecovery: discards restart the timer too */
	DPP_FRER_TAKE_NO_SEQUENCE = 2, /* frerSeqRcvyTakeNoSequence: frames without an R-tag pass */
	DPP_FRER_POP = 4,	       /* the R-tag is removed from a passed frame before delivery */
	DPP_FRER_LATENT = 8,	       /* latent error detection (7.4.4) runs */
};

/* enum dpp_frer_role: what this node does with a stream's frames (struct dpp_frer_stream.role). */
enum dpp_frer_role {
	DPP_FRER_ROLE_NONE = 0,	    /* not a stream here: frames go on as without FRER */
	DPP_FRER_ROLE_GENERATE = 1, /* talker side: sequence number in a pushed R-tag, replicated */
	DPP_FRER_ROLE_RECOVER = 2,  /* listener side: duplicates eliminated, delivered once */
};

/* enum dpp_frer_decision: what the recovery function decided for one frame (the replay tool's
 * per-frame line). */
enum dpp_frer_decision {
	DPP_FRER_NO_STREAM = 0,		/* no recovery function at the frame's stream handle: passed */
	DPP_FRER_TAKE_ANY = 1,		/* the first tagged frame after a reset: passed */
	DPP_FRER_IN_ORDER = 2,		/* the next sequence number: passed */
	DPP_FRER_OUT_OF_ORDER = 3,	/* a sequence number not seen yet, not the next: passed */
	DPP_FRER_DUPLICATE = 4,		/* seen already: discarded */
	DPP_FRER_ROGUE = 5,		/* outside the history: discarded */
	DPP_FRER_TAGLESS_PASSED = 6,	/* no R-tag, take-no-sequence: passed */
	DPP_FRER_TAGLESS_DISCARDED = 7, /* no R-tag: discarded */
};

/* Value of dpp_frer_recovery, by stream handle: one sequence recovery function. The control plane
 * writes the parameters with the state and counters zeroed but take_any set (the state after
 * SequenceRecoveryReset, which the standard runs at BEGIN, not counted as a reset). The data path
 * decides a frame in order or a duplicate without the lock: the state that decides it (history,
 * seq, span, take_any) is one aligned 8-byte word, read at once and replaced by compare-and-swap;
 * the rare paths (a reset, latent error detection, a frame outside the history, the first after a
 * reset, one without an R-tag) take the lock (nf/frer/recover.h says why the two together are
 * linearizable). The frames passed and discarded without the lock are counted per CPU
 * (dpp_frer_cpu_counts), those under it here: frerCpsSeqRcvyPassedPackets and
 * frerCpsSeqRcvyDiscardedPackets are the sums. User space reads a slot with
 * BPF_F_LOCK: a consistent snapshot of the lock's part, the rest as of a moment during the read.
 * Times are the kernel's clock (bpf_ktime_get_ns), ns. The timers of the standard (RemainingTicks,
 * the latent error test and reset periods) are kept as times and acted on when the next frame of
 * the stream arrives.
 *
 * Three cache lines, the slots page-aligned (dpp_frer_recovery is mmapable for that): the first
 * line holds all that a frame in order or a duplicate reads and writes (parameters, state, the
 * counters those frames move), so that a stream's frame touches one line of it; the rare counters
 * and latent error detection (opt-in) come after. */
struct dpp_frer_recovery {
	struct bpf_spin_lock lock;
	__u8 algo;	  /* enum dpp_frer_algo */
	__u8 history_len; /* frerSeqRcvyHistoryLength, 2..32 (the vector's); 0: an empty slot */
	__u8 flags;	  /* enum dpp_frer_flags */
	__u8 latent_paths; /* frerSeqRcvyLatentErrorPaths */
	/* the state, one 8-byte word at offset 8 (union frer_state in nf/frer/recover.h) */
	__u32 history; /* SequenceHistory: bit i set when seq - i has been seen */
	__u16 seq;     /* RecovSeqNum */
	__u8 span;     /* sequence numbers from the first passed after TakeAny up to seq, at most 255 */
	__u8 take_any; /* TakeAny: the next tagged frame passes whatever its number (1); bit 7 is the
			* lock holder's while it decides (never seen under BPF_F_LOCK) */
	__u64 reset_ns;	  /* frerSeqRcvyResetMSec, in ns; 0: never reset by time */
	__u64 restart_ns; /* when RemainingTicks was last restarted (a passed frame) */
	/* counters, frerCpsSeqRcvy... (10.8) */
	__u64 passed;
	__u64 discarded;
	__u64 out_of_order;
	__u64 lost;
	/* second line: what reordering, rogue frames, resets and latent error detection touch */
	__u64 rogue;
	__u64 tagless;
	__u64 resets;
	__u64 latent_errors; /* LatentErrorTest found the difference over latent_difference */
	__u64 latent_resets; /* LatentErrorReset ran */
	__u32 latent_difference; /* frerSeqRcvyLatentErrorDifference */
	__u32 reserved;
	__u64 latent_period_ns;	      /* frerSeqRcvyLatentErrorPeriod, in ns */
	__u64 latent_reset_period_ns; /* frerSeqRcvyLatentResetPeriod, in ns */
	/* third line */
	__u64 latent_test_ns;  /* when the next LatentErrorTest is due */
	__u64 latent_reset_ns; /* when the next LatentErrorReset is due; 0: at the first frame */
	__s64 base_difference; /* CurBaseDifference */
	__u64 reserved2[5];    /* to a whole number of lines */
};

/* Key of dpp_frer_null: null stream identification (802.1CB 6.4), a destination MAC address and a
 * VLAN id (0: untagged or priority-tagged, tagged "priority"; DPP_FRER_VLAN_ANY: any, tagged "all"). The stream identification by IP (6.6) is keyed by a struct dpp_flow_key
 * holding only vlan, family, proto, dscp, ports and addresses (the rest 0): dpp_frer_ip. */
struct dpp_frer_null_key {
	__u8 dmac[6];
	__u16 vlan;
};

/* Value of dpp_frer_streams, by stream handle: the node's part in the stream. */
struct dpp_frer_stream {
	__u32 next_seq; /* GENERATE: the next sequence number (GenSeqNum, low 16 bits), atomic */
	__u8 role;	/* enum dpp_frer_role */
	__u8 reserved[3];
	__u32 deliver_ifindex; /* RECOVER: where passed frames go (bpf_redirect); 0: onward (the
				* pipeline on a NetApp node, the kernel's stack on a FRER node) */
	__u32 tx_group; /* GENERATE: its entry of dpp_frer_tx, the group of its member ports (shared
			 * by the streams of the same ports) */
};

/* Key and value of dpp_frer_members: a port a GENERATE stream is replicated to, and the VLAN id
 * its copies carry there (0: as they came). */
struct dpp_frer_member_key {
	__u32 stream;
	__u32 ifindex;
};

struct dpp_frer_member {
	__u16 vlan;
	__u16 reserved;
};

/* Value of dpp_frer_cpu_counts (per CPU), by stream handle: the frames this CPU decided without
 * the slot's lock, passed (in order or out of order) and discarded (duplicates); the slot's passed
 * and discarded count those decided under it. */
struct dpp_frer_cpu_counts {
	__u64 passed;
	__u64 discarded;
};

/* Value of dpp_frer_port_stats (per CPU), by ingress ifindex: frerCpsSeqEncErroredPackets, frames
 * whose R-tag could not be read; and frames of a stream generated here that had no group of ports
 * to be replicated to (802.1CB has no counter for them; the pipeline's frer_no_group reason counts
 * them node-wide, a FRER node's talker only here). */
struct dpp_frer_port_stats {
	__u64 encode_errors;
	__u64 ungrouped;
};

/* enum dpp_frer_gate: bits of dpp_frer_gate[0], the kinds of stream identification the node has
 * entries for; nonzero: the pipeline hands every frame to FRER's stage, which tries only those. */
enum dpp_frer_gate {
	DPP_FRER_GATE_NULL = 1, /* dpp_frer_null has entries */
	DPP_FRER_GATE_IP = 2,	/* dpp_frer_ip has entries */
	DPP_FRER_GATE_NULL_ANY = 4, /* dpp_frer_null has entries of DPP_FRER_VLAN_ANY: a second lookup */
};

/* FRER's reasons, from DPP_REASON_BASE_FRER (dpp/core/consts.h): counted by the pipeline's stage. */
#define DPP_FRER_REASONS(X)                                                                      \
	X(FRER, FRER_ELIMINATED, frer_eliminated, 0) /* a duplicate (or rogue) copy: dropped */ \
	X(FRER, FRER_BAD_RTAG, frer_bad_rtag, 1)     /* R-tag cut short: dropped, an encode error */ \
	X(FRER, FRER_NO_STREAM, frer_no_stream, 2)   /* R-tagged, no stream recovers it here: passed */ \
	X(FRER, FRER_NO_GROUP, frer_no_group, 3)     /* generated, no group of ports: default verdict */

#endif /* DPP_NF_FRER_H */
