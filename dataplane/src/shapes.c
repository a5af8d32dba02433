// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Shapes and the config: a shape set is published into the inactive slot and made active by the
 * one config write that also invalidates the flow cache; the shape filters are kept here. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>

#include "libdpp_internal.h"

const struct dpp_map_spec shapes_maps[] = {
	DPP_ARRAY_SPEC(DPP_MAP_SHAPES, "dpp_shapes", BPF_MAP_TYPE_ARRAY, struct dpp_shape_set),
	DPP_ARRAY_SPEC(DPP_MAP_CONFIG, "dpp_config", BPF_MAP_TYPE_ARRAY, struct dpp_config),
	DPP_ARRAY_SPEC(DPP_MAP_FILTERS, "dpp_filters", BPF_MAP_TYPE_ARRAY, __u64),
	{},
};

int config_read(struct dpp *d, struct dpp_config *cfg)
{
	return lookup_u32(d, DPP_MAP_CONFIG, 0, cfg);
}

/* libdpp's writers of the config (a publish's shape set and generation, the set-call, the
 * functions' word, functions.c, an upgrade's generation) each read it whole and write it whole, so
 * they take turns: within a handle by its mutex, and across the processes that open a pinned
 * instance (the service, dppctl, the CLI's commands: a reopen refreshes the functions' word) by an
 * exclusive flock on the instance's pin directory, held for the read-modify-write. An instance not
 * pinned yet (its load) is seen by no other process. */
void config_lock(struct dpp *d)
{
	pthread_mutex_lock(&d->config_lock);
	d->config_lock_fd = -1;
	if (!d->pin_dir[0])
		return;
	d->config_lock_fd = open(d->pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->config_lock_fd >= 0 && !flock(d->config_lock_fd, LOCK_EX))
		return;
	if (errno != ENOENT) /* not pinned yet: no other process sees it */
		pr_warn("lock the config of instance '%s' against other processes: %s", d->instance,
			strerror(errno));
	if (d->config_lock_fd >= 0)
		close(d->config_lock_fd);
	d->config_lock_fd = -1;
}

void config_unlock(struct dpp *d)
{
	if (d->config_lock_fd >= 0)
		close(d->config_lock_fd); /* releases the flock */
	d->config_lock_fd = -1;
	pthread_mutex_unlock(&d->config_lock);
}

/* Generation 0 is skipped on wrap-around: zero-filled flow cache entries must never look valid. */
__u32 generation_next(__u32 gen)
{
	return gen + 1 ? gen + 1 : 1;
}

static int filter_count_rule(const struct dpp_flow_key *key, const struct dpp_rule *rule, void *ctx)
{
	(void)rule;
	filters_add(ctx, key, 1);
	return 0;
}

/* A reopened instance's filter counts, from its rules and published shapes: each published shape
 * keeps its filter and every rule is counted. Bits stay as they are: a bit no rule holds (left by a
 * writer that died between deleting a rule and clearing it) only costs a probe, and clearing bits
 * here could race with another handle's writes. */
static int filters_count(struct dpp *d)
{
	struct dpp_shape_set set;
	__u32 i;
	int err;

	err = dpp_shapes_get(d, &set);
	for (i = 0; !err && i < set.count && i < DPP_MAX_SHAPES; i++)
		filters_adopt(d->filters, set.shapes[i].mask.shape, set.filters[i]);
	if (!err)
		err = dpp_rules_foreach(d, filter_count_rule, d->filters);
	if (err)
		pr_warn("count the rules into the shape filters: %s", strerror(-err));
	return err;
}

/* Without its filters a shape is searched the slow way, never wrongly: a map that cannot be mapped
 * into memory costs the filters, not the instance. */
void filters_init(struct dpp *d)
{
	int err = filters_open(map_fd(d, DPP_MAP_FILTERS), &d->filters);

	if (err)
		pr_warn("map the shape filters into memory: %s; shapes go unfiltered", strerror(-err));
	d->filters_counted = !d->reused;
}

/* Before the first change of rules or shapes through this handle: a reopened instance's rules are
 * counted then, not at open, so that handles that only read (dppctl status, a second look at the
 * maps) do not walk every rule. */
int filters_ready(struct dpp *d)
{
	int err;

	if (d->filters_counted || !d->filters)
		return 0;
	err = filters_count(d);
	if (!err)
		d->filters_counted = true;
	return err;
}

/* Gives each shape of a set about to be published its filter, and frees the filters of shapes
 * with no rules that neither it nor the set in use (slot `active`) names. */
static void shapes_filter(struct dpp *d, struct dpp_shape_set *set, __u32 active)
{
	__u32 keep[2 * DPP_MAX_SHAPES], n = 0, i;
	struct dpp_shape_set current;

	for (i = 0; i < set->count; i++) {
		set->filters[i] = filters_for_shape(d->filters, set->shapes[i].mask.shape);
		keep[n++] = set->shapes[i].mask.shape;
	}
	if (!lookup_u32(d, DPP_MAP_SHAPES, active ? 1 : 0, &current))
		for (i = 0; i < current.count && i < DPP_MAX_SHAPES; i++)
			keep[n++] = current.shapes[i].mask.shape;
	filters_release(d->filters, keep, n);
}

/* The set written into the inactive slot, then one write of the config flips to it and invalidates
 * the flow cache together. */
static int shapes_flip(struct dpp *d, struct dpp_shape_set *set)
{
	struct dpp_config cfg;
	__u32 slot = 0;
	int err;

	config_lock(d);
	err = config_read(d, &cfg);
	if (!err) {
		slot = cfg.shape_set ? 0 : 1;
		shapes_filter(d, set, cfg.shape_set);
		err = update_u32(d, DPP_MAP_SHAPES, slot, set);
	}
	if (!err) {
		cfg.shape_set = slot;
		cfg.generation = generation_next(cfg.generation);
		err = update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
	}
	config_unlock(d);
	return err;
}

int dpp_shapes_publish(struct dpp *d, const struct dpp_shape *shapes, __u32 n)
{
	struct dpp_shape_set set = {};
	int err;

	if (!d || (n && !shapes))
		return -EINVAL;
	if (n > DPP_MAX_SHAPES) {
		pr_warn("%u shapes, at most %d", n, DPP_MAX_SHAPES);
		return -E2BIG;
	}
	err = filters_ready(d);
	if (err)
		return err;
	set.count = n;
	if (n)
		memcpy(set.shapes, shapes, n * sizeof(*shapes));
	return shapes_flip(d, &set);
}

int dpp_shapes_get(struct dpp *d, struct dpp_shape_set *out)
{
	struct dpp_config cfg;
	int err;

	if (!d || !out)
		return -EINVAL;
	err = config_read(d, &cfg);
	if (err)
		return err;
	return lookup_u32(d, DPP_MAP_SHAPES, cfg.shape_set ? 1 : 0, out);
}

int dpp_config_get(struct dpp *d, struct dpp_config *out)
{
	if (!d || !out)
		return -EINVAL;
	return config_read(d, out);
}

static int config_valid(const struct dpp_config *cfg)
{
	if (cfg->shape_set > 1 || cfg->default_verdict >= DPP_VERDICT_MAX ||
	    !cfg->meter_window_ns) {
		pr_warn("invalid config: shape set %u, default verdict %u, meter window %llu ns",
			cfg->shape_set, cfg->default_verdict,
			(unsigned long long)cfg->meter_window_ns);
		return -EINVAL;
	}
	return 0;
}

/* The caller's config, but for what libdpp keeps: the active shape set and the generation (a
 * publish's, which a caller's earlier read would undo) and the functions' word (functions.c). */
int dpp_config_set(struct dpp *d, const struct dpp_config *cfg)
{
	struct dpp_config old, next;
	int err;

	if (!d || !cfg)
		return -EINVAL;
	err = config_valid(cfg);
	if (err)
		return err;
	config_lock(d);
	err = config_read(d, &old);
	if (!err) {
		next = *cfg;
		next.shape_set = old.shape_set;
		next.generation = old.generation;
		next.functions = old.functions;
		err = update_u32(d, DPP_MAP_CONFIG, 0, &next);
	}
	config_unlock(d);
	if (!err && old.meter_window_ns != cfg->meter_window_ns)
		err = cpus_rebudget(d, cfg->meter_window_ns);
	return err;
}
