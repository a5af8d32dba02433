/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* ATSSS's action in the pipeline's dispatch. An ATSSS rule gives the mode of a flow within a UE's
 * downlink, read by ATSSS's stage (nf/atsss/flows.h) from the frames it marks DPP_KEY_ATSSS; every
 * shape compares that bit, so the pipeline's own classification never matches such a rule. Were
 * one met anyway, the frame gets the default verdict, as a rule that says DEFAULT. */
#ifndef DPP_NF_ATSSS_ACT_H
#define DPP_NF_ATSSS_ACT_H

#include "core/outcome.h"

/* act_default: core/act.h defines it before it includes this header. */
static __always_inline int act_atsss(const struct dpp_act_ctx *a)
{
	return act_default(a);
}

#endif /* DPP_NF_ATSSS_ACT_H */
