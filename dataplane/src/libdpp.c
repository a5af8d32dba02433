// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* libdpp: loads the DPP pipeline from its skeleton (or reopens it from its bpffs pins), attaches
 * it with XDP links and drives its maps. Returns 0 or a negative errno; never prints. This file
 * opens and closes an instance; libdpp_internal.h lists the others. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"
#include "dpp.skel.h" /* after the ABI headers, whose enums it names */

#define DPP_DEFAULT_WINDOW_NS 1000000ULL

static bool instance_name_valid(const char *name)
{
	size_t i, len = strlen(name);

	if (len < 1 || len > DPP_INSTANCE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Copy a caller's options struct (first member: size_t sz, its size as the caller was built) into
 * ours of out_sz bytes: an older caller's missing tail reads as zero, and a newer caller's options
 * we do not know about must all be unset. in NULL: all zero. */
int opts_copy(const void *in, void *out, size_t out_sz)
{
	const char *bytes = in;
	size_t in_sz, i;

	memset(out, 0, out_sz);
	if (!in)
		return 0;
	in_sz = *(const size_t *)in;
	if (in_sz < sizeof(size_t))
		return -EINVAL;
	for (i = out_sz; i < in_sz; i++) {
		if (bytes[i])
			return -E2BIG;
	}
	memcpy(out, in, in_sz < out_sz ? in_sz : out_sz);
	*(size_t *)out = out_sz;
	return 0;
}

static int handle_alloc(struct dpp **out)
{
	struct dpp *d;
	int ncpus;

	ncpus = libbpf_num_possible_cpus();
	if (ncpus < 0) {
		pr_warn("count possible CPUs: %s", strerror(-ncpus));
		return ncpus;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->retired_slots_fd = -1;
	d->ncpus = ncpus;
	pthread_mutex_init(&d->config_lock, NULL);
	*out = d;
	return 0;
}

static int instance_name_set(struct dpp *d, const char *name)
{
	if (!instance_name_valid(name)) {
		pr_warn("invalid instance name '%s': use 1 to %d of [A-Za-z0-9_-]", name,
			DPP_INSTANCE_NAME_MAX);
		return -EINVAL;
	}
	snprintf(d->instance, sizeof(d->instance), "%s", name);
	return path_fmt(d->pin_dir, sizeof(d->pin_dir), "%s/%s", DPP_PIN_ROOT, name);
}

/* Flow cache slots: max_flows rounded up to a power of two (the program masks its hash with
 * slots - 1), or DPP_MAX_FLOWS. 0 when max_flows cannot be rounded up within 32 bits. */
static __u32 flow_slots(__u32 max_flows)
{
	__u32 n = 1;

	if (!max_flows)
		return DPP_MAX_FLOWS;
	if (max_flows > 1u << 31)
		return 0;
	while (n < max_flows)
		n <<= 1;
	return n;
}

/* dpp_flows holds a row of slots per possible CPU, a power of two in each. */
static bool flow_rows_valid(const struct dpp *d, __u32 max_entries)
{
	__u32 row = max_entries / d->ncpus;

	return row && row * d->ncpus == max_entries && !(row & (row - 1));
}

/* The program masks flow hashes with a row's slot count: anything else would leave slots unused,
 * or rows overlapping. */
const struct dpp_map_spec instance_maps[] = {
	{ .id = DPP_MAP_FLOWS, .name = "dpp_flows", .type = BPF_MAP_TYPE_ARRAY,
	  .key_size = sizeof(__u32), .value_size = sizeof(struct dpp_flow_entry),
	  .entries_valid = flow_rows_valid,
	  .entries_rule = "not a power of two per possible CPU" },
	{},
};

/* dpp_policer_stats holds a row of dpp_policers' slots per possible CPU (bpf/nf/qos/maps.h): sized
 * after dpp_policers (maps_size), for the object of a load or an upgrade alike. */
int policer_rows_size(struct dpp *d, struct dpp_bpf *s)
{
	__u32 slots = bpf_map__max_entries(s->maps.dpp_policers);
	int err;

	if ((__u64)slots * d->ncpus > UINT32_MAX) {
		pr_warn("%u policers on %d CPUs: at most %llu", slots, d->ncpus,
			(unsigned long long)UINT32_MAX / d->ncpus);
		return -E2BIG;
	}
	s->rodata->cfg_policer_slots = slots;
	err = bpf_map__set_max_entries(s->maps.dpp_policer_stats, slots * d->ncpus);
	if (err)
		pr_warn("size dpp_policer_stats: %s", strerror(-err));
	return err;
}

static int skel_configure(struct dpp *d, const struct dpp_open_opts *o)
{
	__u32 slots = flow_slots(o->max_flows), rules = o->max_rules ?: DPP_MAX_RULES;
	struct dpp_bpf *s = d->skel;
	int err;

	if (!slots) {
		pr_warn("%u flow cache slots: at most %u", o->max_flows, 1u << 31);
		return -E2BIG;
	}
	if ((__u64)slots * d->ncpus > UINT32_MAX || (__u64)rules * d->ncpus > UINT32_MAX) {
		pr_warn("%u rules and %u flow slots on %d CPUs: at most %llu each", rules, slots,
			d->ncpus, (unsigned long long)UINT32_MAX / d->ncpus);
		return -E2BIG;
	}
	s->rodata->cfg_flow_cache = o->flow_cache;
	s->rodata->cfg_flow_slots = slots;
	s->rodata->cfg_trace = o->trace;
	s->rodata->cfg_rule_slots = rules;
	err = bpf_map__set_max_entries(s->maps.dpp_rules, rules);
	if (!err)
		err = bpf_map__set_max_entries(s->maps.dpp_rule_stats, rules * d->ncpus);
	if (!err)
		err = bpf_map__set_max_entries(s->maps.dpp_flows, slots * d->ncpus);
	if (err) {
		pr_warn("size the rule and flow maps: %s", strerror(-err));
		return err;
	}
	err = maps_size(d, s->obj, o->map_sizes, o->nr_map_sizes);
	return err ? err : policer_rows_size(d, s);
}

static int config_init(struct dpp *d, const struct dpp_open_opts *o)
{
	struct dpp_config cfg = {
		.generation = 1,
		.shape_set = 0,
		/* 0 (ABORTED) is never a sensible default, so it means "unset" in the options */
		.default_verdict = o->default_verdict ?: DPP_VERDICT_PASS,
		.default_alt_group = DPP_NONE,
		.meter_window_ns = o->meter_window_ns ?: DPP_DEFAULT_WINDOW_NS,
	};

	return update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
}

/* The object this library carries, opened (not loaded): to load, or for its BTF. */
int skel_open(struct dpp_bpf **out)
{
	int err;

	*out = dpp_bpf__open();
	if (*out)
		return 0;
	err = -errno;
	pr_warn("open BPF object: %s", strerror(-err));
	return err;
}

static int instance_load(struct dpp *d, const struct dpp_open_opts *o)
{
	int err;

	if (o->default_verdict >= DPP_VERDICT_MAX) {
		pr_warn("invalid default verdict %u", o->default_verdict);
		return -EINVAL;
	}
	err = dpp_kernel_check_settings(NULL, o->flow_cache, o->trace);
	if (err)
		return err;
	err = skel_open(&d->skel);
	if (err)
		return err;
	err = skel_configure(d, o);
	if (err)
		return err;
	err = dpp_bpf__load(d->skel);
	if (err) {
		pr_warn("load BPF object: %s", strerror(-err));
		kernel_load_refusal_explain(err, o->flow_cache, o->trace);
		return err;
	}
	err = progs_collect_loaded(&d->progs, d->skel->obj, bpf_map__fd(d->skel->maps.dpp_progs));
	if (!err)
		err = maps_collect_loaded(d);
	if (!err)
		err = maps_check(d);
	if (!err)
		err = config_init(d, o);
	if (!err && d->pin_dir[0])
		err = pins_create(d);
	if (!err)
		clock_start(d, false);
	return err;
}

static int instance_reopen(struct dpp *d, const struct dpp_open_opts *o)
{
	int err;

	d->reused = true;
	err = maps_collect_pinned(d);
	if (!err)
		err = maps_check(d);
	if (!err)
		err = maps_check_btf(d);
	if (!err)
		err = maps_sizes_compare(d, o->map_sizes, o->nr_map_sizes);
	if (!err)
		err = progs_collect_pinned(d);
	if (!err)
		err = links_scan(d);
	if (!err) /* the pinned config may come from a build without the functions' word */
		err = functions_refresh(d);
	if (!err)
		clock_start(d, true); /* a read-only reopen leaves a running timer as it is */
	if (!err)
		pr_info("instance '%s' reused from %s", d->instance, d->pin_dir);
	return err;
}

int dpp_open(const struct dpp_open_opts *opts, struct dpp **out)
{
	char prog_path[PATH_MAX];
	struct dpp_open_opts o;
	struct dpp *d = NULL;
	int err, pinned = 0;

	log_hook_libbpf();
	if (!out)
		return -EINVAL;
	*out = NULL;
	err = opts_copy(opts, &o, sizeof(o));
	if (err)
		return err;
	err = handle_alloc(&d);
	if (err)
		return err;
	if (o.instance) {
		err = instance_name_set(d, o.instance);
		if (!err)
			pinned = instance_pinned(d, prog_path, sizeof(prog_path));
		if (!err && pinned < 0)
			err = pinned;
		if (err)
			goto cleanup;
	}
	err = pinned ? instance_reopen(d, &o) : instance_load(d, &o);
	if (!err)
		filters_init(d);
	if (err)
		goto cleanup;
	*out = d;
	return 0;
cleanup:
	dpp_close(d);
	return err;
}

void dpp_close(struct dpp *d)
{
	int i;

	if (!d)
		return;
	for (i = 0; i < d->nr_links; i++)
		close(d->links[i].fd);
	for (i = 0; i < d->nr_maps; i++)
		close(d->maps[i].fd);
	progs_close(&d->progs);
	if (d->retired_slots_fd >= 0)
		close(d->retired_slots_fd);
	filters_close(d->filters);
	dpp_bpf__destroy(d->skel);
	free(d->links);
	pthread_mutex_destroy(&d->config_lock);
	free(d);
}

int dpp_unpin(struct dpp *d)
{
	int err;

	if (!d)
		return -EINVAL;
	if (!d->pin_dir[0])
		return 0;
	err = pins_clear(d);
	pin_dirs_remove(d);
	/* The handle now behaves as an anonymous instance: nothing more gets pinned. */
	d->pin_dir[0] = '\0';
	return err;
}

int dpp_reused(const struct dpp *d)
{
	return d && d->reused ? 1 : 0;
}

int dpp_prog_fd(const struct dpp *d)
{
	return d ? entry_fd(d) : -EINVAL;
}

int dpp_map_fd(const struct dpp *d, const char *name)
{
	const struct dpp_map_ref *m;

	if (!d || !name)
		return -EINVAL;
	m = map_find(d, name);
	return m ? m->fd : -ENOENT;
}
