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
	instance_maps, rules_maps, shapes_maps, cpus_maps, stats_maps, testrun_maps, upf_maps,
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
	m->lock = DPP_MAP_LOCK_UNKNOWN;
	m->info_known = false;
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

int map_info_get(const char *name, int fd, struct bpf_map_info *info)
{
	__u32 len = sizeof(*info);
	int err;

	memset(info, 0, sizeof(*info));
	err = bpf_obj_get_info_by_fd(fd, info, &len);
	if (err)
		pr_warn("get info of map %s: %s", name, strerror(-err));
	return err;
}

/* Whether a pinned map's values are laid out as the carried object declares them (map_btf_differs);
 * the maps the object does not have are not this build's to judge. */
static int map_btf_reusable(const struct dpp *d, const struct bpf_map *map,
			    const struct btf *new_btf, struct dpp_btf_cache *btf)
{
	const struct dpp_map_ref *m = map_find(d, bpf_map__name(map));
	char why[DPP_BTF_WHY_MAX];
	struct bpf_map_info info;
	int err;

	if (!m || bpf_map__is_internal(map))
		return 0;
	err = map_info_get(m->name, m->fd, &info);
	if (!err)
		err = map_btf_differs(map, new_btf, &info, btf, why, sizeof(why));
	if (err <= 0)
		return err;
	pr_warn("map %s: %s: the ABI changed: unpin the instance and load it again", m->name, why);
	return -EPROTO;
}

/* A reopened instance's maps against the BTF of the object this library carries: every map, not
 * only those map_check knows, since any struct may change at the same size (the object is opened,
 * not loaded, for its BTF). */
int maps_check_btf(struct dpp *d)
{
	struct dpp_btf_cache btf = {};
	struct dpp_bpf *skel;
	struct bpf_map *map;
	int err;

	err = skel_open(&skel);
	if (err)
		return err;
	bpf_object__for_each_map(map, skel->obj) {
		err = map_btf_reusable(d, map, bpf_object__btf(skel->obj), &btf);
		if (err)
			break;
	}
	btf_cache_free(&btf);
	dpp_bpf__destroy(skel);
	return err;
}

/* Maps whose size is only a capacity: the program computes no index from it (hash maps, and arrays
 * indexed by slots the control plane hands out, which the lookup bounds). Only these are sized at
 * load (dpp_open_opts.map_sizes); every other map's size is the program's, or libdpp's own
 * (max_rules, max_flows; dpp_policer_stats: a row of dpp_policers per CPU). */
static const char *const sizable_maps[] = {
	"dpp_upf_teids", /* PDRs of the TEIDs below its size */
	"dpp_upf_ue4", /* PDRs of the UE addresses of the pools the UPF assigns from */
	"dpp_upf_dl4", /* PDRs of the UE IPv4 addresses the SMF gives, a bucket's ways at a time */
	"dpp_upf_uplink", /* PDRs by TEID */
	"dpp_upf_downlink", /* PDRs by UE address */
	"dpp_upf_usage", /* URR slots */
	"dpp_upf_sdf_pdrs", /* slots of PDRs with SDF filters */
	"dpp_policers", /* policer ids */
	"dpp_rule_policers", /* the policers of the rule slots below its size */
	"dpp_routes", /* routes of the private routing tables */
	"dpp_neighs", /* their resolved next hops */
};

static bool map_sizable(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(sizable_maps) / sizeof(sizable_maps[0]); i++) {
		if (!strcmp(sizable_maps[i], name))
			return true;
	}
	return false;
}

static bool map_type_per_cpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_ARRAY || type == BPF_MAP_TYPE_PERCPU_HASH ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

/* Whether sizes[i] may be applied to the map it names, whose type and value size are given (found
 * false: the object has no such map): -ENOENT, -EPERM, -E2BIG or -EINVAL, said why. */
static int map_size_check(const struct dpp *d, const struct dpp_map_size *sizes, __u32 i,
			  bool found, __u32 type, __u32 value_size)
{
	const char *name = sizes[i].name;
	__u64 bytes;
	__u32 j;

	if (!name || !sizes[i].max_entries) {
		pr_warn("map size %u: %s", i, name ? "0 entries: at least 1" : "no map name");
		return -EINVAL;
	}
	for (j = 0; j < i; j++) {
		if (sizes[j].name && !strcmp(sizes[j].name, name)) {
			pr_warn("map size of %s given twice", name);
			return -EINVAL;
		}
	}
	if (!found) {
		pr_warn("map size of %s: the BPF object has no map of that name", name);
		return -ENOENT;
	}
	if (!map_sizable(name)) {
		pr_warn("map size of %s: its size is the program's%s, not a capacity to choose", name,
			map_declared(name) ? " (or libdpp's: max_rules, max_flows, dpp_policers)" : "");
		return -EPERM;
	}
	bytes = (__u64)sizes[i].max_entries * ((value_size + 7) & ~7u) * d->ncpus;
	if (map_type_per_cpu(type) && bytes > DPP_PERCPU_BYTES_MAX) {
		pr_warn("map size of %s: %u entries of %u bytes on each of %d possible CPUs take %llu "
			"MiB, more than the %llu MiB a per-CPU map may take",
			name, sizes[i].max_entries, value_size, d->ncpus, bytes >> 20,
			DPP_PERCPU_BYTES_MAX >> 20);
		return -E2BIG;
	}
	return 0;
}

/* Before the object is loaded: its maps sized as asked, each size checked (map_size_check). */
int maps_size(struct dpp *d, struct bpf_object *obj, const struct dpp_map_size *sizes, __u32 n)
{
	struct bpf_map *map;
	__u32 i;
	int err;

	if (n && !sizes)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		map = sizes[i].name ? bpf_object__find_map_by_name(obj, sizes[i].name) : NULL;
		if (map && bpf_map__is_internal(map))
			map = NULL;
		err = map_size_check(d, sizes, i, map, map ? bpf_map__type(map) : 0,
				     map ? bpf_map__value_size(map) : 0);
		if (!err)
			err = bpf_map__set_max_entries(map, sizes[i].max_entries);
		if (err)
			return err;
	}
	return 0;
}

/* A reopened instance keeps its pinned maps' sizes: each size asked for is checked as at load, and
 * one that differs from the pinned map's is reported, not applied. */
int maps_sizes_compare(struct dpp *d, const struct dpp_map_size *sizes, __u32 n)
{
	struct bpf_map_info info;
	struct dpp_map_ref *m;
	__u32 len, i;
	int err = 0;

	if (n && !sizes)
		return -EINVAL;
	for (i = 0; !err && i < n; i++) {
		memset(&info, 0, sizeof(info));
		len = sizeof(info);
		m = sizes[i].name ? map_find(d, sizes[i].name) : NULL;
		if (m) {
			err = bpf_obj_get_info_by_fd(m->fd, &info, &len);
			if (err) {
				pr_warn("get info of map %s: %s", m->name, strerror(-err));
				return err;
			}
		}
		err = map_size_check(d, sizes, i, m, info.type, info.value_size);
		if (!err && info.max_entries != sizes[i].max_entries)
			pr_warn("map %s of instance '%s' is pinned with %u entries: the %u asked for "
				"are not applied (unpin the instance and load it again to resize it)",
				m->name, d->instance, info.max_entries, sizes[i].max_entries);
	}
	return err;
}

/* A map of the upgrading object takes the size of the instance's map it is bound to, when that
 * size was chosen at load (maps_size). */
int map_size_adopt(struct bpf_map *map, int fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int err;

	if (!map_sizable(bpf_map__name(map)))
		return 0;
	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (!err)
		err = bpf_map__set_max_entries(map, info.max_entries);
	if (err)
		pr_warn("size map %s as the instance's: %s", bpf_map__name(map), strerror(-err));
	return err;
}
