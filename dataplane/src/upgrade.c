// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Program upgrade: the programs this library carries replace an instance's under traffic. The new
 * load shares the instance's maps but dpp_progs, which it fills with its own tail-call targets; its
 * pins wait under next/; each link then switches to the new entry in one step, and every step is
 * undone when a later one fails. Last, the staged pins move over the old ones. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"
#include "dpp.skel.h" /* after the ABI headers, whose enums it names */
#include "dpp_writers.skel.h"

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

#define UPGRADE_ABI_HINT                                                                           \
	"it was loaded by a build with another ABI and cannot be upgraded in place; unpin the "   \
	"instance and load it again"

/* The new load: its skeleton, its programs and a dup of its dpp_progs. */
struct upgrade {
	struct dpp_bpf *skel;
	struct dpp_prog_table progs;
	int slots_fd;
	bool had_slots; /* the instance has a dpp_progs (one pinned by an older build has not) */
};

/* Whether the instance's map (fd) differs from the layout the object declares for it: 1 (why says
 * how: type, sizes, entries, or a struct laid out otherwise at the same size, map_btf_differs), 0
 * (the same), or -errno. Quiet: the callers say what it means. */
static int map_layout_differs(const struct bpf_map *map, const struct btf *new_btf, int fd,
			      struct dpp_btf_cache *btf, char *why, size_t why_len)
{
	struct bpf_map_info info;
	int err;

	err = map_info_get(bpf_map__name(map), fd, &info);
	if (err)
		return err;
	if (info.type != bpf_map__type(map) || info.key_size != bpf_map__key_size(map) ||
	    info.value_size != bpf_map__value_size(map) ||
	    info.max_entries != bpf_map__max_entries(map)) {
		snprintf(why, why_len,
			 "type %u key %u value %u bytes with %u entries, the new program's type %u key %u "
			 "value %u with %u",
			 info.type, info.key_size, info.value_size, info.max_entries,
			 bpf_map__type(map), bpf_map__key_size(map), bpf_map__value_size(map),
			 bpf_map__max_entries(map));
		return 1;
	}
	return map_btf_differs(map, new_btf, &info, btf, why, why_len);
}

/* Whether the instance's map has the layout the new object declares for it. libbpf would refuse the
 * load as well, but without naming the map; a different layout means the instance was loaded by a
 * build with another ABI (a table resized, counters renumbered, a struct laid out otherwise at the
 * same size), whose maps cannot be shared. */
static int map_reusable(const struct dpp *d, const struct bpf_map *map, const struct btf *new_btf,
			int fd, struct dpp_btf_cache *btf)
{
	char why[DPP_BTF_WHY_MAX];
	int err;

	err = map_layout_differs(map, new_btf, fd, btf, why, sizeof(why));
	if (err <= 0)
		return err;
	pr_warn("map %s of instance '%s': %s: " UPGRADE_ABI_HINT, bpf_map__name(map), d->instance,
		why);
	return -EPROTO;
}

/* Open the object this library carries with every map the instance has bound to it, so the new
 * programs share the running ones' rules, counters and configuration; not dpp_progs, which holds
 * the programs of one load. Each must have the layout the object declares (map_reusable). */
static int upgrade_skel_open(struct dpp *d, const struct dpp_upgrade_opts *o,
			     struct dpp_bpf **out)
{
	struct dpp_btf_cache btf = {};
	struct dpp_bpf *skel;
	struct dpp_map_ref *m;
	struct bpf_map *map;
	int err;

	/* the new program is the data path too: the same minimum, and the same settings' limits */
	err = dpp_kernel_check_settings(NULL, o->flow_cache, o->trace);
	if (err)
		return err;
	err = skel_open(&skel);
	if (err)
		return err;
	skel->rodata->cfg_flow_cache = o->flow_cache;
	skel->rodata->cfg_trace = o->trace;
	skel->rodata->cfg_flow_slots = d->known[DPP_MAP_FLOWS]->max_entries / d->ncpus;
	skel->rodata->cfg_rule_slots = rule_slots(d);
	/* Sized at load, like the instance's (skel_configure): compared as the others below. */
	err = bpf_map__set_max_entries(skel->maps.dpp_rules, d->known[DPP_MAP_RULES]->max_entries);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.dpp_rule_stats,
					       d->known[DPP_MAP_RULE_STATS]->max_entries);
	if (!err)
		err = bpf_map__set_max_entries(skel->maps.dpp_flows,
					       d->known[DPP_MAP_FLOWS]->max_entries);
	/* dpp_policer_stats's rows are sized after dpp_policers, which takes the instance's size here
	 * rather than in the loop below (map_size_adopt, again there: the same size) */
	if (!err && (m = map_find(d, "dpp_policers")))
		err = map_size_adopt(skel->maps.dpp_policers, m->fd);
	if (!err)
		err = policer_rows_size(d, skel);
	bpf_object__for_each_map(map, skel->obj) {
		if (err)
			break;
		if (bpf_map__is_internal(map) || !strcmp(bpf_map__name(map), DPP_SLOTS_MAP) ||
		    !(m = map_find(d, bpf_map__name(map))))
			continue;
		err = map_size_adopt(map, m->fd);
		if (!err)
			err = map_reusable(d, map, bpf_object__btf(skel->obj), m->fd, &btf);
		if (err)
			break;
		err = bpf_map__reuse_fd(map, m->fd);
		if (err) {
			pr_warn("bind map %s to the new program: %s", m->name, strerror(-err));
			break;
		}
	}
	btf_cache_free(&btf);
	if (!err) {
		err = dpp_bpf__load(skel);
		if (err) {
			pr_warn("load the new program (its maps must match the running instance's): %s",
				strerror(-err));
			kernel_load_refusal_explain(err, o->flow_cache, o->trace);
		}
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

/* Pin the new load's objects under next/, where they wait for the links to switch. */
static int pins_stage(struct dpp *d, const struct upgrade *u)
{
	char path[PATH_MAX];
	int err;

	if (!d->pin_dir[0])
		return 0;
	err = pins_unstage(d); /* what a crashed upgrade left */
	if (!err)
		err = pin_dir_make(d, "next/maps");
	if (!err)
		err = pin_dir_make(d, "next/progs");
	if (!err)
		err = pin_path(d, path, sizeof(path), "next/maps", DPP_SLOTS_MAP);
	if (!err)
		err = bpf_obj_pin(u->slots_fd, path);
	if (!err)
		err = progs_pin(d, &u->progs, "next/progs");
	if (!err)
		err = pin_path(d, path, sizeof(path), "next/prog", NULL);
	if (!err)
		err = bpf_obj_pin(u->progs.progs[0].fd, path);
	if (err) {
		pr_warn("pin the new programs under %s/next: %s", d->pin_dir, strerror(-err));
		pins_unstage(d);
	}
	return err;
}

/* Replace the pin <sub>/<leaf> (leaf NULL: <sub>) with next/<sub>/<leaf> in one step. */
static int pin_move(const struct dpp *d, const char *sub, const char *leaf)
{
	char from[PATH_MAX], to[PATH_MAX], next_sub[PATH_MAX];
	int err;

	err = path_fmt(next_sub, sizeof(next_sub), "next/%s", sub);
	if (!err)
		err = pin_path(d, from, sizeof(from), next_sub, leaf);
	if (!err)
		err = pin_path(d, to, sizeof(to), sub, leaf);
	if (!err && rename(from, to))
		err = -errno;
	if (err)
		pr_warn("replace pin %s: %s", to, strerror(-err));
	return err;
}

static bool prog_named(const struct dpp_prog_table *t, const char *name)
{
	int i;

	for (i = 1; i < t->nr; i++) {
		if (!strcmp(t->progs[i].name, name))
			return true;
	}
	return false;
}

/* Move the staged pins over the instance's, the entry's last (it marks a complete instance), and
 * drop the pins of programs the new load no longer has. */
static int pins_commit(struct dpp *d, const struct upgrade *u)
{
	char path[PATH_MAX];
	int i, err, e;

	if (!d->pin_dir[0])
		return 0;
	err = pin_move(d, "maps", DPP_SLOTS_MAP);
	for (i = 1; i < u->progs.nr; i++) {
		e = pin_move(d, "progs", u->progs.progs[i].name);
		err = err ?: e;
	}
	for (i = 1; i < d->progs.nr; i++) {
		if (prog_named(&u->progs, d->progs.progs[i].name))
			continue;
		e = pin_path(d, path, sizeof(path), "progs", d->progs.progs[i].name);
		err = err ?: (e ?: unlink_quiet(path));
	}
	e = pin_move(d, "prog", NULL);
	err = err ?: e;
	e = pins_unstage(d); /* next/ is empty by now: its directories go */
	return err ?: e;
}

/* Cached flow decisions were made by the old program: have the new one classify them again. */
static int flows_invalidate(struct dpp *d)
{
	struct dpp_config cfg;
	int err;

	config_lock(d);
	err = config_read(d, &cfg);
	if (!err) {
		cfg.generation = generation_next(cfg.generation);
		err = update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
	}
	config_unlock(d);
	return err;
}

/* dpp_config.functions from the functions' maps, written before any link runs the new entry,
 * which tests it: no frame of the new program sees it clear while FRER, the dispatcher or ATSSS has
 * work. The old program ignores the word (a build before it has the config's reserved word there,
 * which btf_compare.c lets the new build take), so setting it early changes nothing for it, and a
 * failed switch leaves a word that is right for whichever program runs. */
static int functions_set_before_switch(struct dpp *d)
{
	int err = functions_refresh(d);

	if (err)
		pr_warn("instance '%s' not upgraded: the new entry would skip FRER, the dispatcher or "
			"ATSSS", d->instance);
	return err;
}

/* The new load's programs and dpp_progs, and the maps it has that the instance had not. */
static int upgrade_load(struct dpp *d, const struct dpp_upgrade_opts *o, struct upgrade *u)
{
	int err;

	u->had_slots = map_find(d, DPP_SLOTS_MAP) != NULL;
	err = upgrade_skel_open(d, o, &u->skel);
	if (!err)
		err = progs_collect_loaded(&u->progs, u->skel->obj, bpf_map__fd(u->skel->maps.dpp_progs));
	if (!err) {
		u->slots_fd = fcntl(bpf_map__fd(u->skel->maps.dpp_progs), F_DUPFD_CLOEXEC, 0);
		if (u->slots_fd < 0)
			err = -errno;
	}
	if (!err)
		err = upgrade_maps_adopt(d, u->skel);
	return err;
}

/* The instance runs the new load: its handle takes the new programs, dpp_progs and skeleton. The
 * previous dpp_progs stays open until the next upgrade or dpp_close: a PROG_ARRAY is emptied when
 * its last fd and pin go, and a frame that entered the previous entry before its link switched
 * still tail-calls through it. */
static void upgrade_take(struct dpp *d, struct upgrade *u)
{
	struct dpp_map_ref *slots = map_find(d, DPP_SLOTS_MAP);

	if (u->had_slots) {
		if (d->retired_slots_fd >= 0)
			close(d->retired_slots_fd);
		d->retired_slots_fd = slots->fd;
		slots->fd = u->slots_fd;
		slots->info_known = false; /* another map: the tables ask the kernel again */
		u->slots_fd = -1;
	}
	progs_close(&d->progs);
	d->progs = u->progs;
	u->progs.nr = 0;
	dpp_bpf__destroy(d->skel);
	d->skel = u->skel;
	u->skel = NULL;
}

int dpp_upgrade(struct dpp *d, const struct dpp_upgrade_opts *opts)
{
	struct upgrade u = { .slots_fd = -1 };
	struct dpp_upgrade_opts o;
	int err, old_fd, switched = 0;

	if (!d)
		return -EINVAL;
	err = opts_copy(opts, &o, sizeof(o));
	if (!opts)
		o.flow_cache = true;
	if (!err)
		err = links_scan(d);
	if (!err)
		err = upgrade_load(d, &o, &u);
	if (!err)
		err = pins_stage(d, &u);
	if (!err)
		err = functions_set_before_switch(d);
	old_fd = entry_fd(d);
	if (!err)
		err = links_switch(d, old_fd, u.progs.progs[0].fd, &switched);
	if (err) {
		links_switch_back(d, u.progs.nr ? u.progs.progs[0].fd : -1, old_fd, switched);
		goto cleanup;
	}
	if (pins_commit(d, &u))
		pr_warn("instance '%s' runs the new programs, but some pins still name the old ones",
			d->instance);
	if (flows_invalidate(d))
		pr_warn("the flow cache keeps decisions of the previous program until rules change");
	pr_info("instance '%s': %d program(s) replaced on %d interface(s)", d->instance, u.progs.nr,
		d->nr_links);
	upgrade_take(d, &u);
	clock_start(d, false); /* the new load's callback: its programs read its own word */
cleanup:
	if (err && d->pin_dir[0])
		pins_unstage(d);
	progs_close(&u.progs);
	if (u.slots_fd >= 0)
		close(u.slots_fd);
	dpp_bpf__destroy(u.skel);
	return err;
}

/* The writers' object (dpp_writers.bpf.c) opened to load `name` alone: every other program left
 * out, every map the instance has with the object's layout bound to it, every other map not created
 * (a program that needs one fails to load: *why names the first such map of the instance, laid out
 * otherwise). Not the pipeline's object: its program array names the pipeline's programs, which
 * libbpf would put in it, loaded or not. */
static int program_alone_open(const struct dpp *d, const char *name, struct dpp_writers_bpf **out,
			      char *why, size_t why_len)
{
	struct dpp_btf_cache btf = {};
	struct bpf_program *prog;
	const struct dpp_map_ref *m;
	char differs[DPP_BTF_WHY_MAX];
	struct bpf_map *map;
	int err, found = 0;

	*out = dpp_writers_bpf__open();
	if (!*out) {
		err = -errno;
		pr_warn("open the writers' BPF object: %s", strerror(-err));
		return err;
	}
	bpf_object__for_each_program(prog, (*out)->obj) {
		bool it = !strcmp(bpf_program__name(prog), name);

		found |= it;
		bpf_program__set_autoload(prog, it);
	}
	if (!found)
		return -ENOENT;
	bpf_object__for_each_map(map, (*out)->obj) {
		if (bpf_map__is_internal(map))
			continue;
		m = map_find(d, bpf_map__name(map));
		err = m ? map_size_adopt(map, m->fd) : 0;
		if (!err && m)
			err = map_layout_differs(map, bpf_object__btf((*out)->obj), m->fd, &btf, differs,
						 sizeof(differs));
		if (err < 0)
			break;
		if (err && !why[0])
			snprintf(why, why_len, "map %s: %s", bpf_map__name(map), differs);
		err = m && !err ? bpf_map__reuse_fd(map, m->fd) : bpf_map__set_autocreate(map, false);
		if (err)
			break;
	}
	btf_cache_free(&btf);
	return err;
}

/* The program's pin among the instance's (progs/<name>); one another process made is as good. */
static void program_pin(const struct dpp *d, const char *name, int fd)
{
	char path[PATH_MAX];
	int err;

	if (!d->pin_dir[0])
		return;
	err = pin_dir_make(d, "progs");
	if (!err)
		err = pin_path(d, path, sizeof(path), "progs", name);
	if (!err && bpf_obj_pin(fd, path) && errno != EEXIST)
		err = -errno;
	if (err)
		pr_warn("pin program %s of instance '%s': %s", name, d->instance, strerror(-err));
}

int dpp_program_add(struct dpp *d, const char *name)
{
	char why[DPP_BTF_WHY_MAX + DPP_MAP_NAME_MAX] = "";
	struct dpp_writers_bpf *skel = NULL;
	int err, fd;

	if (!d || !name)
		return -EINVAL;
	if (prog_named(&d->progs, name))
		return 0;
	err = program_alone_open(d, name, &skel, why, sizeof(why));
	if (err == -ENOENT) /* not one this build loads alone: the caller's to say */
		goto out;
	if (!err)
		err = dpp_writers_bpf__load(skel);
	if (err && why[0]) {
		pr_warn("instance '%s' has no program %s and this build's cannot be loaded against its "
			"maps (%s): the ABI changed: unpin the instance and load it again",
			d->instance, name, why);
		err = -EPROTO;
		goto out;
	}
	if (err) { /* the maps fit: a refusal of the moment (memory, limits), worth asking again */
		pr_warn("instance '%s' has no program %s and this build's could not be loaded: %s",
			d->instance, name, strerror(-err));
		goto out;
	}
	fd = fcntl(bpf_program__fd(bpf_object__find_program_by_name(skel->obj, name)), F_DUPFD_CLOEXEC,
		   0);
	err = fd < 0 ? -errno : progs_adopt(&d->progs, name, fd);
	if (!err) {
		program_pin(d, name, fd);
		pr_info("instance '%s': program %s loaded from this build", d->instance, name);
	}
out:
	dpp_writers_bpf__destroy(skel);
	return err;
}
