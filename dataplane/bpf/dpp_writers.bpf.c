// SPDX-License-Identifier: GPL-2.0-only
/* The control plane's writers of values in place, alone, with the maps they write: what an instance
 * pinned by an older build lacks is loaded from here, bound to the instance's maps (libdpp's
 * dpp_program_add). The pipeline (dpp.bpf.c) carries the same programs for the instances it loads;
 * this object has no program array to fill, so one program loads without the pipeline's others. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "nf/atsss/words.h"

char LICENSE[] SEC("license") = "GPL";
