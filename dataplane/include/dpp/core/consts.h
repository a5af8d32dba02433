/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The pipeline core's constants and enums, shared by the XDP programs, libdpp and (mirrored in
 * netapp/dataplane/binding.py) Python. Each network function's own are in dpp/nf/. */
#ifndef DPP_CORE_CONSTS_H
#define DPP_CORE_CONSTS_H

/* Map sizes. Rule-sized maps are resized at load time by libdpp (struct dpp_open_opts); the flow
 * cache's slot count is always a power of two (libdpp rounds up). */
#ifndef DPP_MAX_RULES
#define DPP_MAX_RULES 65536
#endif
#ifndef DPP_MAX_FLOWS
#define DPP_MAX_FLOWS 65536
#endif
#ifndef DPP_MAX_SHAPES
#define DPP_MAX_SHAPES 16
#endif

/* Flow cache use (struct dpp_flow_use): the window, the hit rate below which probing stops, and
 * the share of packets that still probe while it is stopped. Powers of two where they mask. */
#define DPP_FLOW_USE_WINDOW 4096
#define DPP_FLOW_USE_MIN_HIT_PCT 50
#define DPP_FLOW_USE_SAMPLE 64

/* Shape filters (dpp/core/filter.h): DPP_MAX_FILTERS filters of DPP_FILTER_WORDS 64-bit words
 * (8 KiB, 65,536 bits) each. A key sets two bits of one word; a shape is published with its filter
 * while it has at most DPP_FILTER_MAX_RULES rules, without one above that. At 4,096 rules about
 * 1.7% of the keys no rule has still pass the filter (simulated with this hash). Two shape sets of
 * DPP_MAX_SHAPES each can be in use at once. */
#define DPP_FILTER_WORDS 1024
#define DPP_FILTER_MAX_RULES 8192
#define DPP_MAX_FILTERS 32

/* Parser bounds: every loop in the parser is bounded by one of these. */
#define DPP_MAX_VLAN_TAGS 2
#define DPP_MAX_IPV6_EXT_HDRS 6
#define DPP_MAX_GTP_EXT_HDRS 8

/* Well-known UDP ports of the encapsulations we parse. */
#define DPP_PORT_VXLAN 4789
#define DPP_PORT_GENEVE 6081
#define DPP_PORT_GTPU 2152

/* "No such thing": no rule, no alternative group, no CPU. */
#define DPP_NONE 0xffffffffu

/* enum dpp_action: what a rule asks for. DEFAULT is never installed; it marks packets that got the
 * configured default verdict (malformed, or a fallback with nothing better to do). */
enum dpp_action {
	DPP_ACTION_PASS = 0,
	DPP_ACTION_DROP = 1,
	DPP_ACTION_STEER = 2,
	DPP_ACTION_FORWARD = 3,
	DPP_ACTION_REDIRECT = 4,
	DPP_ACTION_DEFAULT = 5,
	DPP_ACTION_MAX,
};

/* enum dpp_verdict: the XDP return code a packet got; values equal enum xdp_action. */
enum dpp_verdict {
	DPP_VERDICT_ABORTED = 0,
	DPP_VERDICT_DROP = 1,
	DPP_VERDICT_PASS = 2,
	DPP_VERDICT_TX = 3,
	DPP_VERDICT_REDIRECT = 4,
	DPP_VERDICT_MAX,
};

/* enum dpp_reason: why a packet did not simply get its rule's action. Parse reasons send the packet
 * to the default verdict; the others explain a fallback or an informational pass. Mirrored by
 * netapp.dataplane.binding.Reason and checked against this header's BTF by tests/dataplane. */
enum dpp_reason {
	DPP_REASON_NONE = 0,
	DPP_REASON_TRUNC_ETH = 1,	 /* shorter than an Ethernet header */
	DPP_REASON_TRUNC_VLAN = 2,	 /* 802.1Q/QinQ tag cut short */
	DPP_REASON_VLAN_DEPTH = 3,	 /* more VLAN tags than DPP_MAX_VLAN_TAGS */
	DPP_REASON_TRUNC_IPV4 = 4,	 /* IPv4 header (or its options) cut short */
	DPP_REASON_BAD_IPV4 = 5,	 /* IPv4 version/IHL/total length invalid */
	DPP_REASON_TRUNC_IPV6 = 6,	 /* IPv6 header or an extension header cut short */
	DPP_REASON_BAD_IPV6 = 7,	 /* IPv6 version or payload length invalid */
	DPP_REASON_IPV6_EXT_DEPTH = 8,	 /* more extension headers than DPP_MAX_IPV6_EXT_HDRS */
	DPP_REASON_TRUNC_L4 = 9,	 /* UDP/TCP/ICMP header cut short */
	DPP_REASON_TRUNC_VXLAN = 10,
	DPP_REASON_TRUNC_GENEVE = 11,
	DPP_REASON_BAD_GENEVE = 12,	 /* unsupported version or protocol */
	DPP_REASON_TRUNC_GRE = 13,
	DPP_REASON_BAD_GRE = 14,	 /* unsupported version, routing present, or unknown protocol */
	DPP_REASON_TRUNC_GTP = 15,	 /* GTP-U header or an extension header cut short */
	DPP_REASON_BAD_GTP = 16,	 /* not GTPv1, or an extension header of length 0 */
	DPP_REASON_GTP_EXT_DEPTH = 17,	 /* more extension headers than DPP_MAX_GTP_EXT_HDRS */
	DPP_REASON_GTP_SIGNALLING = 18,	 /* echo, error indication, end marker...: passed to the kernel */
	DPP_REASON_NOT_IP = 19,		 /* no IP layer (ARP, LLDP...): passed to the kernel */
	DPP_REASON_CPU_UNAVAILABLE = 20, /* steer target not in the CPU set */
	DPP_REASON_CPU_OVERLOADED = 21,	 /* target or local CPU overloaded: forwarded to alternatives */
	DPP_REASON_NO_ALTERNATIVE = 22,	 /* had to forward, but no usable alternative group */
	DPP_REASON_PORT_UNAVAILABLE = 23, /* redirect/forward egress port not in the port map */
	DPP_REASON_MAX,
};

/* enum dpp_prog: the slots of dpp_progs, the programs the XDP entry tail-calls (bpf/core/tail.h).
 * Appended: a slot is where a program of the same object is found, and dpp_prog_stats' index. */
enum dpp_prog {
	DPP_PROG_TRACE = 0, /* records the packet's outcome in dpp_trace (loaded with trace on) */
	DPP_PROG_MAX,
};

/* enum dpp_overlay: the overlay a packet arrived in (struct dpp_flow_key.overlay). */
enum dpp_overlay {
	DPP_OVERLAY_NONE = 0,
	DPP_OVERLAY_VXLAN = 1,
	DPP_OVERLAY_GENEVE = 2,
	DPP_OVERLAY_GRE = 3,
};

/* enum dpp_rule_flags: struct dpp_rule.flags bits. */
enum dpp_rule_flags {
	DPP_RULE_BEST_EFFORT = 1, /* pass locally, forward to alternatives when the local CPU is overloaded */
};

/* enum dpp_key_flags: struct dpp_flow_key.flags bits (which optional layers the packet had). */
enum dpp_key_flags {
	DPP_KEY_GTP = 1,      /* a GTP-U T-PDU: teid (and qfi if a PDU Session Container) are valid */
	DPP_KEY_GTP_QFI = 2,  /* a PDU Session Container carried the QFI */
	DPP_KEY_GTP_UL = 4,   /* PDU Session Container says uplink */
	DPP_KEY_FRAGMENT = 8, /* a non-first IP fragment: no L4 ports */
	DPP_KEY_VNI = 16,     /* vni is valid: VXLAN with the I flag, GENEVE, GRE with a key */
};

/* enum dpp_xdp_mode: how libdpp attaches to an interface. */
enum dpp_xdp_mode {
	DPP_XDP_MODE_NATIVE = 0,
	DPP_XDP_MODE_GENERIC = 1,
	DPP_XDP_MODE_OFFLOAD = 2,
};

#endif /* DPP_CORE_CONSTS_H */
