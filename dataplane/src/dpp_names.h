/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Names of the ABI enums for dppctl's output, indexed by enum value. dppctl only. */
#ifndef DPP_NAMES_H
#define DPP_NAMES_H

#include "dpp/dpp_consts.h"

static const char *const dpp_verdict_names[DPP_VERDICT_MAX] = {
	[DPP_VERDICT_ABORTED] = "aborted",
	[DPP_VERDICT_DROP] = "drop",
	[DPP_VERDICT_PASS] = "pass",
	[DPP_VERDICT_TX] = "tx",
	[DPP_VERDICT_REDIRECT] = "redirect",
};

static const char *const dpp_action_names[DPP_ACTION_MAX] = {
	[DPP_ACTION_PASS] = "pass",
	[DPP_ACTION_DROP] = "drop",
	[DPP_ACTION_STEER] = "steer",
	[DPP_ACTION_FORWARD] = "forward",
	[DPP_ACTION_REDIRECT] = "redirect",
	[DPP_ACTION_DEFAULT] = "default",
};

static const char *const dpp_reason_names[DPP_REASON_MAX] = {
	[DPP_REASON_NONE] = "none",
	[DPP_REASON_TRUNC_ETH] = "trunc_eth",
	[DPP_REASON_TRUNC_VLAN] = "trunc_vlan",
	[DPP_REASON_VLAN_DEPTH] = "vlan_depth",
	[DPP_REASON_TRUNC_IPV4] = "trunc_ipv4",
	[DPP_REASON_BAD_IPV4] = "bad_ipv4",
	[DPP_REASON_TRUNC_IPV6] = "trunc_ipv6",
	[DPP_REASON_BAD_IPV6] = "bad_ipv6",
	[DPP_REASON_IPV6_EXT_DEPTH] = "ipv6_ext_depth",
	[DPP_REASON_TRUNC_L4] = "trunc_l4",
	[DPP_REASON_TRUNC_VXLAN] = "trunc_vxlan",
	[DPP_REASON_TRUNC_GENEVE] = "trunc_geneve",
	[DPP_REASON_BAD_GENEVE] = "bad_geneve",
	[DPP_REASON_TRUNC_GRE] = "trunc_gre",
	[DPP_REASON_BAD_GRE] = "bad_gre",
	[DPP_REASON_TRUNC_GTP] = "trunc_gtp",
	[DPP_REASON_BAD_GTP] = "bad_gtp",
	[DPP_REASON_GTP_EXT_DEPTH] = "gtp_ext_depth",
	[DPP_REASON_GTP_SIGNALLING] = "gtp_signalling",
	[DPP_REASON_NOT_IP] = "not_ip",
	[DPP_REASON_CPU_UNAVAILABLE] = "cpu_unavailable",
	[DPP_REASON_CPU_OVERLOADED] = "cpu_overloaded",
	[DPP_REASON_NO_ALTERNATIVE] = "no_alternative",
	[DPP_REASON_PORT_UNAVAILABLE] = "port_unavailable",
};

static const char *const dpp_overlay_names[] = {
	[DPP_OVERLAY_NONE] = "none",
	[DPP_OVERLAY_VXLAN] = "vxlan",
	[DPP_OVERLAY_GENEVE] = "geneve",
	[DPP_OVERLAY_GRE] = "gre",
};

static const char *const dpp_mode_names[] = {
	[DPP_XDP_MODE_NATIVE] = "native",
	[DPP_XDP_MODE_GENERIC] = "generic",
	[DPP_XDP_MODE_OFFLOAD] = "offload",
};

static const char *const dpp_prog_names[DPP_PROG_MAX] = {
	[DPP_PROG_TRACE] = "trace",
};

/* Bit i of struct dpp_flow_key.flags (enum dpp_key_flags). */
static const char *const dpp_key_flag_names[] = {
	"gtp",
	"gtp_qfi",
	"gtp_ul",
	"fragment",
};

/* A value the table does not know (a newer ABI) prints as "?" rather than reading past it. */
#define DPP_NAME(table, v)                                                                    \
	((unsigned long)(v) < sizeof(table) / sizeof((table)[0]) && (table)[(v)] ? (table)[(v)] \
										 : "?")

#endif /* DPP_NAMES_H */
