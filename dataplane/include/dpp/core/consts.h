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
/* Tunnel endpoint addresses rules may name at once (dpp_tunnel_ends): ids 1..255 fit a key's byte. */
#define DPP_MAX_TUNNEL_ENDS 255

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

/* The actions a rule can ask for, X(NAME, name) in value order: enum dpp_action, dppctl's names and
 * the XDP program's dispatch (bpf/core/act.h calls act_<name>) are generated from this list. A new
 * action is one line appended here, its stage act_<name> in its function's header under bpf/nf/, and
 * its table (struct dpp_rule.arg indexes it). DEFAULT is never installed: it marks packets that got
 * the configured default verdict (malformed, or a fallback with nothing better to do). */
#define DPP_ACTIONS(X)                                                                           \
	X(PASS, pass)                                                                            \
	X(DROP, drop)                                                                            \
	X(STEER, steer)                                                                          \
	X(FORWARD, forward)                                                                      \
	X(REDIRECT, redirect)                                                                    \
	X(DEFAULT, default)                                                                      \
	X(UPF, upf)                                                                              \
	X(TUNNEL, tunnel)                                                                        \
	X(DUPLICATE, duplicate)                                                                  \
	X(ATSSS, atsss)

#define DPP_ACTION_ENUM(NAME, name) DPP_ACTION_##NAME,
enum dpp_action {
	DPP_ACTIONS(DPP_ACTION_ENUM)
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

/* Reasons (enum dpp_reason, dpp/reasons.h): why a packet did not simply get its rule's action. Each
 * network function numbers its own in a range of DPP_REASON_RANGE from its base, listed in its
 * header (dpp/nf/<function>.h) as X(FUNCTION, NAME, name, n): DPP_REASON_<NAME> = base + n. Ranges:
 *   core (the parser)   0..31      forward   48..63     upf    80..95     frer    112..127
 *   steer              32..47      redirect  64..79     qos    96..111    atsss   128..143
 *   routing           144..159    tunnel   176..191
 * (frer and atsss reserved); 192..255 for functions to come, DPP_REASON_MAX 256. Values are ABI: counters are
 * indexed by them (dpp_reasons), so a reason keeps its value once released. */
#define DPP_REASON_RANGE 16
#define DPP_REASON_BASE_CORE 0
#define DPP_REASON_BASE_STEER 32
#define DPP_REASON_BASE_FORWARD 48
#define DPP_REASON_BASE_REDIRECT 64
#define DPP_REASON_BASE_UPF 80
#define DPP_REASON_BASE_QOS 96
#define DPP_REASON_BASE_ROUTING 144
#define DPP_REASON_BASE_FRER 160
#define DPP_REASON_BASE_TUNNEL 176

/* The core's reasons: the parser's, which send the packet to the default verdict (but
 * GTP_SIGNALLING and NOT_IP: passed to the kernel). Two ranges. */
#define DPP_CORE_REASONS(X)                                                                      \
	X(CORE, NONE, none, 0)                                                                   \
	X(CORE, TRUNC_ETH, trunc_eth, 1)	   /* shorter than an Ethernet header */         \
	X(CORE, TRUNC_VLAN, trunc_vlan, 2)	   /* 802.1Q/QinQ tag cut short */               \
	X(CORE, VLAN_DEPTH, vlan_depth, 3)	   /* more VLAN tags than DPP_MAX_VLAN_TAGS */   \
	X(CORE, TRUNC_IPV4, trunc_ipv4, 4)	   /* IPv4 header (or its options) cut short */  \
	X(CORE, BAD_IPV4, bad_ipv4, 5)		   /* IPv4 version/IHL/total length invalid */   \
	X(CORE, TRUNC_IPV6, trunc_ipv6, 6)	   /* IPv6 header or an extension header short */ \
	X(CORE, BAD_IPV6, bad_ipv6, 7)		   /* IPv6 version or payload length invalid */  \
	X(CORE, IPV6_EXT_DEPTH, ipv6_ext_depth, 8) /* more than DPP_MAX_IPV6_EXT_HDRS */         \
	X(CORE, TRUNC_L4, trunc_l4, 9)		   /* UDP/TCP/ICMP header cut short */           \
	X(CORE, TRUNC_VXLAN, trunc_vxlan, 10)                                                    \
	X(CORE, TRUNC_GENEVE, trunc_geneve, 11)                                                  \
	X(CORE, BAD_GENEVE, bad_geneve, 12)	   /* unsupported version or protocol */         \
	X(CORE, TRUNC_GRE, trunc_gre, 13)                                                        \
	X(CORE, BAD_GRE, bad_gre, 14)	   /* bad version, routing present, unknown protocol */  \
	X(CORE, TRUNC_GTP, trunc_gtp, 15)	   /* GTP-U header or an extension header short */ \
	X(CORE, BAD_GTP, bad_gtp, 16)	   /* not GTPv1, or an extension header of length 0 */   \
	X(CORE, GTP_EXT_DEPTH, gtp_ext_depth, 17)  /* more than DPP_MAX_GTP_EXT_HDRS */           \
	X(CORE, GTP_SIGNALLING, gtp_signalling, 18) /* echo, error indication, end marker... */  \
	X(CORE, NOT_IP, not_ip, 19)		   /* no IP layer (ARP, LLDP...) */

/* enum dpp_prog: the slots of dpp_progs, the programs the XDP entry tail-calls (bpf/core/tail.h).
 * Appended: a slot is where a program of the same object is found, and dpp_prog_stats' index. */
enum dpp_prog {
	DPP_PROG_TRACE = 0, /* records the packet's outcome in dpp_trace (loaded with trace on) */
	DPP_PROG_FRER = 1,  /* FRER's stage, ahead of the pipeline on a node with FRER streams */
	DPP_PROG_ENTRY = 2, /* the entry itself: where FRER's stage hands a frame on to the pipeline */
	DPP_PROG_ATSSS = 3, /* ATSSS's stage: the frames of a node's ATSSS sessions, once parsed */
	DPP_PROG_MAX,
};

/* enum dpp_functions: bits of dpp_config.functions, the functions the entry hands packets to. Each
 * is set by its function's writer while the function has something to do on the node (after its
 * own tables are written) and cleared before they are emptied: a node without them pays one test
 * of a word the entry reads anyway. */
enum dpp_functions {
	DPP_FUNCTION_FRER = 1 << 0,  /* dpp_frer_gate nonzero: frames go to FRER's stage first */
	DPP_FUNCTION_RSS = 1 << 1,   /* an interface dispatches GTP-U (dpp_rss_ifaces) */
	DPP_FUNCTION_ATSSS = 1 << 2, /* ATSSS sessions: their frames go to ATSSS's stage */
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
	DPP_RULE_POLICED = 2,	  /* policed before its action: the policers of its slot in dpp_rule_policers */
};

/* enum dpp_key_flags: struct dpp_flow_key.flags bits (which optional layers the packet had). */
enum dpp_key_flags {
	DPP_KEY_GTP = 1,      /* a GTP-U T-PDU: teid (and qfi if a PDU Session Container) are valid */
	DPP_KEY_GTP_QFI = 2,  /* a PDU Session Container carried the QFI */
	DPP_KEY_GTP_UL = 4,   /* PDU Session Container says uplink */
	DPP_KEY_FRAGMENT = 8, /* a non-first IP fragment: no L4 ports */
	DPP_KEY_VNI = 16,     /* vni is valid: VXLAN with the I flag, GENEVE, GRE with a key */
	DPP_KEY_UPF = 32,     /* the UPF's packet whose PDRs have SDF filters (nf/upf/upf.h): every shape
			       * compares this bit, so only the UPF's rules (which set it) match it */
	DPP_KEY_ATSSS = 64,   /* a downlink frame of an ATSSS session with flow rules (nf/atsss/flows.h):
			       * every shape compares this bit, so only ATSSS's rules match it */
};

/* enum dpp_xdp_mode: how libdpp attaches to an interface. */
enum dpp_xdp_mode {
	DPP_XDP_MODE_NATIVE = 0,
	DPP_XDP_MODE_GENERIC = 1,
	DPP_XDP_MODE_OFFLOAD = 2,
};

#endif /* DPP_CORE_CONSTS_H */
