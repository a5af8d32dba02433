// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Program upgrade: the program this library carries replaces an instance's under traffic. It
 * shares the instance's maps, each link switches over in one step, and every step is undone when
 * a later one fails. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"
#include "dpp.skel.h" /* after the ABI headers, whose enums it names */

/* Point every live link of the instance at to_fd, if it still runs from_fd. Returns 0, or -errno
 * with *switched telling how many links (in d->links order) were moved before the failure. */
static int links_switch(struct dpp *d, int from_fd, int to_fd, int *switched)
{
	LIBBPF_OPTS(bpf_link_update_opts, uopts, .flags = BPF_F_REPLACE, .old_prog_fd = from_fd);
	int i, live, err;

	for (i = 0, *switched = 0; i < d->nr_links; i++, (*switched)++) {
		live = link_live(d->links[i].fd);
		if (live < 0)
			return live;
		if (!live)
			continue;
		err = bpf_link_update(d->links[i].fd, to_fd, &uopts);
		if (err) {
			pr_warn("switch the XDP link on ifindex %d to the new program: %s",
				d->links[i].ifindex, strerror(-err));
			return err;
		}
	}
	return 0;
}

static void links_switch_back(struct dpp *d, int from_fd, int to_fd, int count)
{
	struct dpp_link_ref *all = d->links;
	int nr = d->nr_links, moved;

	/* Switch just the first `count` links back, by narrowing the array for the call. */
	d->nr_links = count;
	if (links_switch(d, from_fd, to_fd, &moved))
		pr_warn("%d of %d links could not be switched back to the previous program",
			count - moved, count);
	d->links = all;
	d->nr_links = nr;
}

/* Open the object this library carries with every map the instance has bound to it, so the new
 * program shares the running one's rules, counters and configuration. libbpf refuses to load
 * when a bound map's type, key, value or size differs from what the object declares. */
static int upgrade_skel_open(struct dpp *d, const struct dpp_upgrade_opts *o,
			     struct dpp_bpf **out)
{
	struct dpp_bpf *skel;
	struct dpp_map_ref *m;
	struct bpf_map *map;
	int err = 0;

	skel = dpp_bpf__open();
	if (!skel) {
		err = -errno;
		pr_warn("open BPF object: %s", strerror(-err));
		return err;
	}
	skel->rodata->cfg_flow_cache = o->flow_cache;
	skel->rodata->cfg_trace = o->trace;
	skel->rodata->cfg_flow_slots = d->known[DPP_MAP_FLOWS]->max_entries / d->ncpus;
	skel->rodata->cfg_rule_slots = rule_slots(d);
	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map) || !(m = map_find(d, bpf_map__name(map))))
			continue;
		err = bpf_map__reuse_fd(map, m->fd);
		if (err) {
			pr_warn("bind map %s to the new program: %s", m->name, strerror(-err));
			break;
		}
	}
	if (!err) {
		err = dpp_bpf__load(skel);
		if (err)
			pr_warn("load the new program (its maps must match the running instance's): %s",
				strerror(-err));
	}
	if (err) {
		dpp_bpf__destroy(skel);
		return err;
	}
	*out = skel;
	return 0;
}

/* Maps the new object has and the instance had not (a newer build added them): own and pin. */
static int upgrade_maps_adopt(struct dpp *d, struct dpp_bpf *skel)
{
	char path[PATH_MAX];
	struct bpf_map *map;
	int fd, err;

	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map) || map_find(d, bpf_map__name(map)))
			continue;
		fd = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		err = map_add(d, bpf_map__name(map), fd);
		if (err) {
			close(fd);
			return err;
		}
		if (!d->pin_dir[0])
			continue;
		err = pin_path(d, path, sizeof(path), "maps", bpf_map__name(map));
		if (!err)
			err = bpf_obj_pin(fd, path);
		if (err) {
			pr_warn("pin new map %s: %s", bpf_map__name(map), strerror(-err));
			return err;
		}
		pr_info("new map %s", bpf_map__name(map));
	}
	return 0;
}

/* Replace the program pin in one step: pin beside it, then rename over it (bpffs names may not
 * contain dots). */
static int prog_repin(struct dpp *d, int prog_fd)
{
	char path[PATH_MAX], next[PATH_MAX];
	int err;

	if (!d->pin_dir[0])
		return 0;
	err = pin_path(d, path, sizeof(path), "prog", NULL);
	if (!err)
		err = pin_path(d, next, sizeof(next), "prog_next", NULL);
	if (err)
		return err;
	unlink_quiet(next);
	err = bpf_obj_pin(prog_fd, next);
	if (!err && rename(next, path))
		err = -errno;
	if (err) {
		pr_warn("pin the new program at %s: %s", path, strerror(-err));
		unlink_quiet(next);
	}
	return err;
}

/* Cached flow decisions were made by the old program: have the new one classify them again. */
static int flows_invalidate(struct dpp *d)
{
	struct dpp_config cfg;
	int err;

	err = config_read(d, &cfg);
	if (err)
		return err;
	cfg.generation = generation_next(cfg.generation);
	return update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
}

int dpp_upgrade(struct dpp *d, const struct dpp_upgrade_opts *opts)
{
	struct dpp_upgrade_opts o;
	struct dpp_bpf *skel = NULL;
	int err, new_fd = -1, switched = 0;

	if (!d)
		return -EINVAL;
	err = opts_copy(opts, &o, sizeof(o));
	if (!opts)
		o.flow_cache = true;
	if (!err)
		err = links_scan(d);
	if (!err)
		err = upgrade_skel_open(d, &o, &skel);
	if (err)
		return err;
	new_fd = fcntl(bpf_program__fd(skel->progs.dpp_xdp), F_DUPFD_CLOEXEC, 0);
	if (new_fd < 0) {
		err = -errno;
		goto cleanup;
	}
	err = upgrade_maps_adopt(d, skel);
	if (!err)
		err = links_switch(d, d->prog_fd, new_fd, &switched);
	if (!err)
		err = prog_repin(d, new_fd);
	if (err) {
		links_switch_back(d, new_fd, d->prog_fd, switched);
		goto cleanup;
	}
	if (flows_invalidate(d))
		pr_warn("the flow cache keeps decisions of the previous program until rules change");
	pr_info("instance '%s': program replaced on %d interface(s)", d->instance, d->nr_links);
	close(d->prog_fd);
	d->prog_fd = new_fd;
	new_fd = -1;
	dpp_bpf__destroy(d->skel);
	d->skel = skel;
	skel = NULL;
cleanup:
	if (new_fd >= 0)
		close(new_fd);
	dpp_bpf__destroy(skel);
	return err;
}

