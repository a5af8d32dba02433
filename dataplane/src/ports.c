// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Where FORWARD and REDIRECT send packets: egress ports (a DEVMAP keyed by ifindex) and
 * alternative groups. */
#include <errno.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

const struct dpp_map_spec ports_maps[] = {
	DPP_ARRAY_SPEC(DPP_MAP_PORTS, "dpp_ports", BPF_MAP_TYPE_DEVMAP_HASH, struct bpf_devmap_val),
	DPP_ARRAY_SPEC(DPP_MAP_ALT_GROUPS, "dpp_alt_groups", BPF_MAP_TYPE_ARRAY,
		       struct dpp_alt_group),
	{},
};

int dpp_port_add(struct dpp *d, int ifindex)
{
	struct bpf_devmap_val val = { .ifindex = (__u32)ifindex };

	if (!d || ifindex <= 0)
		return -EINVAL;
	return update_u32(d, DPP_MAP_PORTS, (__u32)ifindex, &val);
}

int dpp_port_remove(struct dpp *d, int ifindex)
{
	__u32 key = (__u32)ifindex;

	if (!d || ifindex <= 0)
		return -EINVAL;
	return bpf_map_delete_elem(map_fd(d, DPP_MAP_PORTS), &key);
}

static int alt_group_check(__u32 group)
{
	if (group < DPP_MAX_ALT_GROUPS)
		return 0;
	pr_warn("alternative group %u out of range (< %d)", group, DPP_MAX_ALT_GROUPS);
	return -EINVAL;
}

int dpp_alt_group_set(struct dpp *d, __u32 group, const struct dpp_alt_group *g)
{
	int err;

	if (!d || !g)
		return -EINVAL;
	err = alt_group_check(group);
	if (err)
		return err;
	if (g->count > DPP_MAX_ALT_MEMBERS) {
		pr_warn("alternative group %u: %u members, at most %d", group, g->count,
			DPP_MAX_ALT_MEMBERS);
		return -EINVAL;
	}
	return update_u32(d, DPP_MAP_ALT_GROUPS, group, g);
}

int dpp_alt_group_clear(struct dpp *d, __u32 group)
{
	struct dpp_alt_group g = {};
	int err;

	if (!d)
		return -EINVAL;
	err = alt_group_check(group);
	if (err)
		return err;
	return update_u32(d, DPP_MAP_ALT_GROUPS, group, &g);
}
