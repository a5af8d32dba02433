/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The pipeline core's map keys and values: the one definition of that part of the data plane ABI,
 * shared by BPF, libdpp and (mirrored in netapp/dataplane/binding.py, checked against BTF by tests)
 * Python. No implicit padding. Each network function's own are in dpp/nf/. */
#ifndef DPP_CORE_STRUCTS_H
#define DPP_CORE_STRUCTS_H

#include <linux/types.h>
#include "consts.h"

/* What the classifier knows about a packet, and (masked, with .shape set) the key of a rule.
 * Numbers are in host order; addresses stay in network order (IPv4 in src[0]/dst[0]). The "UE"
 * fields describe the innermost IP header found: the UE packet inside GTP-U, else the inner or
 * outer one. */
struct dpp_flow_key {
	__u32 ifindex; /* ingress interface */
	__u32 vni;     /* VXLAN/GENEVE VNI or GRE key (valid with DPP_KEY_VNI, else 0) */
	__u32 teid;    /* GTP-U TEID (valid with DPP_KEY_GTP) */
	__u16 vlan;    /* outermost VLAN id, 0 when untagged */
	__u8 overlay;  /* enum dpp_overlay */
	__u8 qfi;      /* GTP-U PDU Session Container QFI (valid with DPP_KEY_GTP_QFI) */
	__u8 flags;    /* enum dpp_key_flags */
	__u8 family;   /* 4 or 6: family of the innermost IP header; 0 when there is none */
	__u8 proto;    /* L4 protocol of the innermost IP header */
	__u8 dscp;     /* DSCP of the innermost IP header */
	__u16 sport;   /* L4 ports of the innermost IP header (ICMP: type, code) */
	__u16 dport;
	__u32 src[4];
	__u32 dst[4];
	__u16 shape;	  /* id of the rule's shape (a shape's mask holds its id here); 0 in a packet's key */
	__u8 tunnel_src;  /* GTP-U: the id of the address the tunnel's IP header comes from, 0: none */
	__u8 tunnel_dst;  /* GTP-U: the id of the address it goes to, 0: none (dpp_tunnel_ends) */
};

/* Key of dpp_tunnel_ends: a tunnel endpoint address that some rule names (MEC 011's srcTunnelAddress,
 * tgtTunnelAddress). The map holds only those; its value is the address's id (1..DPP_MAX_TUNNEL_ENDS),
 * which a GTP-U packet's key carries in .tunnel_src / .tunnel_dst. Ids are small so that the key keeps
 * its 60 bytes: they take the two bytes .shape gave up. */
struct dpp_tunnel_end {
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u32 addr[4]; /* network order, IPv4 in addr[0] */
};

/* Value of dpp_rules: what to do with a packet whose masked key matched. 16 bytes, so that in the
 * kernel's hash element (header, 60-byte key, value) it ends on the key's second cache line: a
 * lookup of a cold rule then touches two lines, not three.
 *
 * An action's arguments are not in the rule: arg is an index into the action's own table (STEER: a
 * CPU id, the key of dpp_cpus and dpp_cpu_map; FORWARD: an alternative group id, the key of
 * dpp_alt_groups, DPP_NONE for the site's default; REDIRECT: an egress port, the key of dpp_ports;
 * PASS, DROP: DPP_NONE; ATSSS: its flows' mode, enum dpp_atsss_mode, in the low
 * DPP_ATSSS_RULE_MODE_BITS and above them the slot of dpp_atsss_flow_state its MTS session holds, 0
 * for none, nf/atsss.h). A new action adds its own table and points into it with arg: it never
 * grows the rule, which every flow cache entry copies (struct dpp_flow_entry). */
struct dpp_rule {
	__u32 slot;	      /* index into dpp_rule_stats; the control plane maps it back to its intent */
	__u16 priority;	      /* the highest priority among all matching shapes wins (intents: 0..65535) */
	__u8 action;	      /* enum dpp_action (never DEFAULT) */
	__u8 flags;	      /* enum dpp_rule_flags */
	__u32 arg;	      /* the action's argument: an index into its table (above) */
	__u32 overflow_group; /* where flows go that the action cannot serve here (STEER overloaded
			       * or unavailable, best-effort PASS overloaded); DPP_NONE: the default */
};

_Static_assert(sizeof(struct dpp_rule) == 16, "a rule ends on its hash element's second line");

/* One rule shape of the tuple-space classifier: which key bits its rules compare. */
struct dpp_shape {
	struct dpp_flow_key mask;
	__u32 max_priority; /* highest priority among this shape's rules: lets the search stop early */
};

/* Value of dpp_shapes (two slots, published double-buffered by flipping dpp_config.shape_set).
 * Shapes are ordered by max_priority, highest first. */
struct dpp_shape_set {
	__u32 count;
	__u32 reserved;
	struct dpp_shape shapes[DPP_MAX_SHAPES];
	/* Filled in by libdpp: shapes[i]'s filter in dpp_filters, plus 1; 0: no filter, always probe. */
	__u32 filters[DPP_MAX_SHAPES];
};

/* Value of dpp_config (one slot): knobs the control plane may change while traffic flows. */
struct dpp_config {
	__u32 generation;	 /* bumped on every rule change: invalidates the flow cache */
	__u32 shape_set;	 /* active slot of dpp_shapes (0 or 1) */
	__u32 default_verdict;	 /* enum dpp_verdict for malformed packets and fallbacks */
	__u32 default_alt_group; /* alternative group for overflow when the rule names none (DPP_NONE) */
	__u64 meter_window_ns;	 /* length of the per-CPU rate meter window */
	__u32 tunnel_ends;	 /* entries of dpp_tunnel_ends: 0, and GTP-U packets look up no address */
	__u32 functions;	 /* enum dpp_functions: the entry's gates, one test for all three */
};

/* Value of every counter map (per CPU; userspace sums the slots). */
struct dpp_counter {
	__u64 packets;
	__u64 bytes;
};

/* Value of dpp_flows (a direct-mapped per-CPU array, indexed by a hash of a packet's unmasked key):
 * the last classification of the flow that last hashed to the slot. Valid while generation equals
 * dpp_config.generation and key equals the packet's key; generation 0 marks a slot never (or not
 * completely) written. */
struct dpp_flow_entry {
	__u32 generation;
	__u32 matched;		 /* 0: the flow matched no rule */
	struct dpp_flow_key key; /* the flow this slot holds */
	struct dpp_rule rule;
};

/* Value of dpp_flow_use (per CPU, one slot): how well the flow cache pays on this CPU. Over a
 * window of DPP_FLOW_USE_WINDOW packets it counts the probes and the hits; a window whose hit rate is
 * below DPP_FLOW_USE_MIN_HIT_PCT turns probing off for the next window, except for one packet in
 * DPP_FLOW_USE_SAMPLE, which keeps the rate measured. All zero: probing on. */
struct dpp_flow_use {
	__u32 packets; /* in the current window */
	__u32 probes;
	__u32 hits;
	__u32 bypass; /* 1: the previous window's hit rate was too low to probe every packet */
};

/* Value of dpp_trace (one slot), written only by programs loaded with trace on: what the last
 * packet got and why. Used by replay and tests. */
struct dpp_trace {
	__u32 verdict;	 /* enum dpp_verdict */
	__u32 action;	 /* enum dpp_action that was carried out */
	__u32 slot;	 /* matched rule's slot, DPP_NONE when no rule matched */
	__u32 cpu;	 /* STEER: the CPU, else DPP_NONE */
	__u32 reason;	 /* enum dpp_reason */
	__u32 alt_group; /* FORWARD: group and member index, else DPP_NONE */
	__u32 alt_member;
	__u32 egress_ifindex; /* REDIRECT/FORWARD via DEVMAP: the port, else 0 */
	struct dpp_flow_key key; /* what the parser extracted (unmasked) */
	__u32 fast_path;	 /* 1: the fixed-layout N3 parser took the packet, 0: the staged one */
	__u32 route_path;	 /* enum dpp_route_path: where a forwarded packet's next hop came from */
};

#endif /* DPP_CORE_STRUCTS_H */
