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

#define DPP_ACTION_NAME(NAME, name) [DPP_ACTION_##NAME] = #name,
static const char *const dpp_action_names[DPP_ACTION_MAX] = { DPP_ACTIONS(DPP_ACTION_NAME) };

/* Sparse: each function's reasons lie in its own range; the gaps print nothing (print_counters). */
#define DPP_REASON_NAME(fn, NAME, name, n) [DPP_REASON_##NAME] = #name,
static const char *const dpp_reason_names[DPP_REASON_MAX] = { DPP_REASONS(DPP_REASON_NAME) };

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
	[DPP_PROG_FRER] = "frer",
	[DPP_PROG_ENTRY] = "entry",
	[DPP_PROG_ATSSS] = "atsss",
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
