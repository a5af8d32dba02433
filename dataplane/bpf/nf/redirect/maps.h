/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The maps of redirecting to an interface. */
#ifndef DPP_NF_REDIRECT_MAPS_H
#define DPP_NF_REDIRECT_MAPS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/redirect.h"

/* ifindex -> egress device: the target of REDIRECT and of FORWARD to another interface */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, DPP_MAX_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} dpp_ports SEC(".maps");

#endif /* DPP_NF_REDIRECT_MAPS_H */
