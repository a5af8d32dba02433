/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Every constant and enum of the data plane ABI: the core's and each network function's. Kept under
 * its old name for libdpp and tools; new code includes the part it needs (dpp/core/, dpp/nf/). */
#ifndef DPP_CONSTS_H
#define DPP_CONSTS_H

#include "core/consts.h"
#include "reasons.h"
#include "nf/steer.h"
#include "nf/forward.h"
#include "nf/redirect.h"
#include "nf/duplicate.h"
#include "nf/upf.h"
#include "nf/rss.h"
#include "nf/qos.h"
#include "nf/routing.h"

#endif /* DPP_CONSTS_H */
