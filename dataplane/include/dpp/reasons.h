/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* enum dpp_reason, generated from the core's list of reasons and each network function's, in their
 * ranges (dpp/core/consts.h). Mirrored by netapp.dataplane.binding.Reason and checked against the
 * BTF of the XDP object by tests/dataplane/test_abi.py. A function adds its list to DPP_REASONS. */
#ifndef DPP_REASONS_H
#define DPP_REASONS_H

#include "core/consts.h"
#include "nf/steer.h"
#include "nf/forward.h"
#include "nf/redirect.h"
#include "nf/upf.h"
#include "nf/qos.h"
#include "nf/routing.h"
#include "nf/frer.h"
#include "nf/tunnel.h"

/* Every reason, X(FUNCTION, NAME, name, n): DPP_REASON_<NAME> = DPP_REASON_BASE_<FUNCTION> + n. */
#define DPP_REASONS(X)                                                                           \
	DPP_CORE_REASONS(X)                                                                      \
	DPP_STEER_REASONS(X)                                                                     \
	DPP_FORWARD_REASONS(X)                                                                   \
	DPP_REDIRECT_REASONS(X)                                                                  \
	DPP_UPF_REASONS(X)                                                                       \
	DPP_QOS_REASONS(X)                                                                       \
	DPP_ROUTING_REASONS(X)                                                                   \
	DPP_FRER_REASONS(X)                                                                      \
	DPP_TUNNEL_REASONS(X)

#define DPP_REASON_ENUM(fn, NAME, name, n) DPP_REASON_##NAME = DPP_REASON_BASE_##fn + (n),
enum dpp_reason {
	DPP_REASONS(DPP_REASON_ENUM)
	DPP_REASON_MAX = 256, /* the size of dpp_reasons: every range fits below it */
};

/* A reason stays in its function's range (the core's is two ranges wide). */
#define DPP_REASON_CHECK(fn, NAME, name, n)                                                      \
	_Static_assert((n) < (DPP_REASON_BASE_##fn == DPP_REASON_BASE_CORE ? 2 : 1) *             \
			       DPP_REASON_RANGE &&                                               \
			       DPP_REASON_BASE_##fn + (n) < DPP_REASON_MAX,                       \
		       "reason " #NAME " lies outside its function's range");
DPP_REASONS(DPP_REASON_CHECK)

#endif /* DPP_REASONS_H */
