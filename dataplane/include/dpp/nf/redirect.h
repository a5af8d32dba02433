/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The ABI of redirecting to an interface (bpf/nf/redirect/): the egress ports. */
#ifndef DPP_NF_REDIRECT_H
#define DPP_NF_REDIRECT_H

#include <linux/types.h>

/* Map size: egress interfaces (dpp_ports), the targets of REDIRECT and of FORWARD. */
#ifndef DPP_MAX_PORTS
#define DPP_MAX_PORTS 64
#endif

/* Redirecting's reasons, from DPP_REASON_BASE_REDIRECT (dpp/core/consts.h). */
#define DPP_REDIRECT_REASONS(X)                                                                  \
	X(REDIRECT, PORT_UNAVAILABLE, port_unavailable, 0) /* egress port not in dpp_ports */

#endif /* DPP_NF_REDIRECT_H */
