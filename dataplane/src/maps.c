// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The instance's maps: every map of the object by name, and the ones libdpp uses checked against
 * the layout their modules declare. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"
#include "dpp.skel.h" /* after the ABI headers, whose enums it names */

/* The modules' maps, checked at open: a module that uses maps adds its list here. */
static const struct dpp_map_spec *const module_maps[] = {
	instance_maps, rules_maps, shapes_maps, cpus_maps, stats_maps, testrun_maps,
};

/* Whether a module declares the map: its writes then have a protocol and go through its calls. */
bool map_declared(const char *name)
{
	const struct dpp_map_spec *spec;
	size_t i;

	for (i = 0; i < sizeof(module_maps) / sizeof(module_maps[0]); i++) {
		for (spec = module_maps[i]; spec->name; spec++) {
			if (!strcmp(spec->name, name))
				return true;
		}
	}
	return false;
}

int lookup_u32(const struct dpp *d, enum dpp_map_id id, __u32 key, void *value)
{
	int err = bpf_map_lookup_elem(map_fd(d, id), &key, value);

	if (err)
		pr_warn("read %s[%u]: %s", d->known[id]->name, key, strerror(-err));
	return err;
}

int update_u32(const struct dpp *d, enum dpp_map_id id, __u32 key, const void *value)
{
	int err = bpf_map_update_elem(map_fd(d, id), &key, value, BPF_ANY);

	if (err)
		pr_warn("write %s[%u]: %s", d->known[id]->name, key, strerror(-err));
	return err;
}

int map_add(struct dpp *d, const char *name, int fd)
{
	struct dpp_map_ref *m;

	if (d->nr_maps == DPP_MAPS_MAX) {
		pr_warn("more than %d maps in the BPF object", DPP_MAPS_MAX);
		return -E2BIG;
	}
	if (strlen(name) >= sizeof(m->name)) {
		pr_warn("map name %s too long", name);
		return -ENAMETOOLONG;
	}
	m = &d->maps[d->nr_maps++];
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->fd = fd;
	return 0;
}

struct dpp_map_ref *map_find(const struct dpp *d, const char *name)
{
	int i;

	for (i = 0; i < d->nr_maps; i++) {
		if (!strcmp(d->maps[i].name, name))
			return (struct dpp_map_ref *)&d->maps[i];
	}
	return NULL;
}

/* Own a copy of every non-internal map fd of the loaded object (the skeleton keeps its own). */
int maps_collect_loaded(struct dpp *d)
{
	struct bpf_map *map;
	int fd, err;

	bpf_object__for_each_map(map, d->skel->obj) {
		if (bpf_map__is_internal(map))
			continue;
		fd = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			err = -errno;
			pr_warn("dup fd of map %s: %s", bpf_map__name(map), strerror(-err));
			return err;
		}
		err = map_add(d, bpf_map__name(map), fd);
		if (err) {
			close(fd);
			return err;
		}
	}
	return 0;
}

int maps_collect_pinned(struct dpp *d)
{
	char dir[PATH_MAX];
	struct dirent *de;
	int fd, err;
	DIR *dh;

	err = pin_path(d, dir, sizeof(dir), "maps", NULL);
	if (err)
		return err;
	dh = opendir(dir);
	if (!dh) {
		err = -errno;
		pr_warn("open %s: %s", dir, strerror(-err));
		return err;
	}
	while ((de = readdir(dh))) {
		if (de->d_name[0] == '.')
			continue;
		fd = pin_open(dir, de->d_name, "map");
		if (fd < 0) {
			err = fd;
			break;
		}
		err = map_add(d, de->d_name, fd);
		if (err) {
			close(fd);
			break;
		}
	}
	closedir(dh);
	return err;
}

/* Returns -EPROTO when a map does not have the layout this libdpp was built against. */
static int map_check(struct dpp *d, const struct dpp_map_spec *spec)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	struct dpp_map_ref *m;
	const char *hint;
	int err;

	hint = d->reused ? "the ABI changed: unpin the instance and load it again"
			 : "the BPF object and libdpp were built from different headers";
	m = map_find(d, spec->name);
	if (!m) {
		pr_warn("map %s missing: %s", spec->name, hint);
		return -EPROTO;
	}
	err = bpf_obj_get_info_by_fd(m->fd, &info, &len);
	if (err) {
		pr_warn("get info of map %s: %s", spec->name, strerror(-err));
		return err;
	}
	if (info.type != spec->type || info.key_size != spec->key_size ||
	    info.value_size != spec->value_size) {
		pr_warn("map %s is type %u key %u value %u bytes, "
			"expected type %u key %u value %u: %s",
			spec->name, info.type, info.key_size, info.value_size, spec->type,
			spec->key_size, spec->value_size, hint);
		return -EPROTO;
	}
	if (spec->entries_valid && !spec->entries_valid(d, info.max_entries)) {
		pr_warn("map %s has %u slots, %s: %s", spec->name, info.max_entries,
			spec->entries_rule, hint);
		return -EPROTO;
	}
	m->max_entries = info.max_entries;
	d->known[spec->id] = m;
	return 0;
}

/* Every module's spec by map id: each id has one spec, or this libdpp was built wrong. */
static int specs_index(const struct dpp_map_spec *by_id[DPP_MAP_NR])
{
	const struct dpp_map_spec *spec;
	size_t i;
	int id;

	memset(by_id, 0, DPP_MAP_NR * sizeof(*by_id));
	for (i = 0; i < sizeof(module_maps) / sizeof(module_maps[0]); i++) {
		for (spec = module_maps[i]; spec->name; spec++) {
			if (by_id[spec->id]) {
				pr_warn("maps %s and %s share an id", by_id[spec->id]->name,
					spec->name);
				return -EPROTO;
			}
			by_id[spec->id] = spec;
		}
	}
	for (id = 0; id < DPP_MAP_NR; id++) {
		if (!by_id[id]) {
			pr_warn("no module declares map id %d", id);
			return -EPROTO;
		}
	}
	return 0;
}

/* In map id order, so that the first mismatch reported is the same whatever the modules' order. */
int maps_check(struct dpp *d)
{
	const struct dpp_map_spec *by_id[DPP_MAP_NR];
	int id, err;

	err = specs_index(by_id);
	for (id = 0; !err && id < DPP_MAP_NR; id++)
		err = map_check(d, by_id[id]);
	return err;
}
