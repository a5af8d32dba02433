/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Every map key and value of the data plane ABI: the core's and each network function's. Kept under
 * its old name for libdpp and tools; new code includes the part it needs (dpp/core/, dpp/nf/). */
#ifndef DPP_STRUCTS_H
#define DPP_STRUCTS_H

#include "dpp_consts.h"
#include "core/structs.h"

#endif /* DPP_STRUCTS_H */
