// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Counters, summed over CPUs: per rule slot (a row of slots per CPU), per verdict, action, parse
 * reason and steered-to CPU. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

/* The counters by verdict, action and reason are indexed by their enums: an instance pinned by a
 * build that numbered them otherwise (reasons before they were ranged per function: 24 slots) would
 * be read and counted under the wrong names, so such an instance is refused, not reused. */
static bool verdict_slots_valid(const struct dpp *d, __u32 max_entries)
{
	(void)d;
	return max_entries == DPP_VERDICT_MAX;
}

static bool action_slots_valid(const struct dpp *d, __u32 max_entries)
{
	(void)d;
	return max_entries == DPP_ACTION_MAX;
}

static bool reason_slots_valid(const struct dpp *d, __u32 max_entries)
{
	(void)d;
	return max_entries == DPP_REASON_MAX;
}

#define DPP_COUNTER_SPEC(i, n, valid, rule)                                                        \
	{ .id = (i), .name = (n), .type = BPF_MAP_TYPE_PERCPU_ARRAY, .key_size = sizeof(__u32),   \
	  .value_size = sizeof(struct dpp_counter), .entries_valid = (valid), .entries_rule = (rule) }

const struct dpp_map_spec stats_maps[] = {
	DPP_ARRAY_SPEC(DPP_MAP_RULE_STATS, "dpp_rule_stats", BPF_MAP_TYPE_ARRAY,
		       struct dpp_counter),
	DPP_COUNTER_SPEC(DPP_MAP_VERDICTS, "dpp_verdicts", verdict_slots_valid,
			 "not one per verdict (DPP_VERDICT_MAX)"),
	DPP_COUNTER_SPEC(DPP_MAP_ACTIONS, "dpp_actions", action_slots_valid,
			 "not one per action (DPP_ACTION_MAX)"),
	DPP_COUNTER_SPEC(DPP_MAP_REASONS, "dpp_reasons", reason_slots_valid,
			 "not DPP_REASON_MAX (reasons are numbered in per-function ranges)"),
	DPP_ARRAY_SPEC(DPP_MAP_CPU_STATS, "dpp_cpu_stats", BPF_MAP_TYPE_PERCPU_ARRAY,
		       struct dpp_counter),
	{},
};

/* Per-CPU values sit at 8-byte strides; summing them relies on dpp_counter needing no padding. */
_Static_assert(sizeof(struct dpp_counter) % 8 == 0, "per-CPU counter stride");

static void counters_sum(const struct dpp_counter *percpu, int ncpus, struct dpp_counter *out)
{
	int i;

	out->packets = 0;
	out->bytes = 0;
	for (i = 0; i < ncpus; i++) {
		out->packets += percpu[i].packets;
		out->bytes += percpu[i].bytes;
	}
}

/* Small per-CPU counter arrays (verdicts, actions, reasons, CPUs): one lookup per key. */
static int counters_read(struct dpp *d, enum dpp_map_id id, struct dpp_counter *out, __u32 n)
{
	struct dpp_counter *percpu;
	int err = 0;
	__u32 key;

	if (!out)
		return -EINVAL;
	percpu = calloc((size_t)d->ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	for (key = 0; key < n; key++) {
		err = lookup_u32(d, id, key, percpu);
		if (err)
			break;
		counters_sum(percpu, d->ncpus, &out[key]);
	}
	free(percpu);
	return err;
}

/* Rule slots per CPU row of dpp_rule_stats (rows of every possible CPU; see bpf/core/maps.h). */
__u32 rule_slots(const struct dpp *d)
{
	return d->known[DPP_MAP_RULE_STATS]->max_entries / d->ncpus;
}

static int lookup_each(int fd, __u32 first, __u32 n, __u32 *keys, struct dpp_counter *vals)
{
	__u32 i;
	int err;

	for (i = 0; i < n; i++) {
		keys[i] = first + i;
		err = bpf_map_lookup_elem(fd, &keys[i], &vals[i]);
		if (err)
			return err;
	}
	return 0;
}

/* Counters [first, first + n) of dpp_rule_stats into keys/vals; n is at most one chunk. */
static int rule_stats_chunk(struct dpp *d, __u32 first, __u32 n, __u32 *keys,
			    struct dpp_counter *vals)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts);
	int fd = map_fd(d, DPP_MAP_RULE_STATS);
	__u32 prev = first - 1, next, cnt = n;
	int err;

	/* The batch cursor is the last key already read: NULL starts at key 0. */
	err = bpf_map_lookup_batch(fd, first ? &prev : NULL, &next, keys, vals, &cnt, &bopts);
	if (err == -ENOENT && cnt == n)
		err = 0;
	if (err && batch_unsupported(err))
		return lookup_each(fd, first, n, keys, vals);
	if (!err && cnt != n)
		err = -EIO;
	return err;
}

static int rule_stats_range(struct dpp *d, __u32 first, __u32 n)
{
	__u32 max = rule_slots(d);

	if (first <= max && n <= max - first)
		return 0;
	pr_warn("rule slots [%u, %u) out of range (< %u)", first, first + n, max);
	return -ERANGE;
}

static void counter_add(struct dpp_counter *sum, const struct dpp_counter *c)
{
	sum->packets += c->packets;
	sum->bytes += c->bytes;
}

/* Adds every CPU's row of slots [first, first + n) into out; n is at most one chunk. */
static int rule_stats_rows_add(struct dpp *d, __u32 first, __u32 n, __u32 *keys,
			       struct dpp_counter *vals, struct dpp_counter *out)
{
	__u32 row = rule_slots(d), i;
	int cpu, err;

	for (cpu = 0; cpu < d->ncpus; cpu++) {
		err = rule_stats_chunk(d, (__u32)cpu * row + first, n, keys, vals);
		if (err)
			return err;
		for (i = 0; i < n; i++)
			counter_add(&out[i], &vals[i]);
	}
	return 0;
}

int dpp_stats_rules(struct dpp *d, __u32 first, __u32 n, struct dpp_counter *out)
{
	struct dpp_counter *vals = NULL;
	__u32 *keys = NULL, off, cnt;
	int err;

	if (!d || (n && !out))
		return -EINVAL;
	err = rule_stats_range(d, first, n);
	if (err || !n)
		return err;
	keys = calloc(DPP_BATCH_CHUNK, sizeof(*keys));
	vals = calloc(DPP_BATCH_CHUNK, sizeof(*vals));
	if (!keys || !vals) {
		err = -ENOMEM;
		goto cleanup;
	}
	memset(out, 0, (size_t)n * sizeof(*out));
	for (off = 0; off < n; off += cnt) {
		cnt = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
		err = rule_stats_rows_add(d, first + off, cnt, keys, vals, out + off);
		if (err) {
			pr_warn("read rule counters from slot %u: %s", first + off, strerror(-err));
			goto cleanup;
		}
	}
cleanup:
	free(keys);
	free(vals);
	return err;
}

int dpp_stats_rules_clear(struct dpp *d, __u32 first, __u32 n)
{
	struct dpp_counter *zeros = NULL;
	__u32 *keys = NULL, row, off, cnt, i, got;
	int cpu, err;

	if (!d)
		return -EINVAL;
	err = rule_stats_range(d, first, n);
	if (err || !n)
		return err;
	keys = calloc(DPP_BATCH_CHUNK, sizeof(*keys));
	zeros = calloc(DPP_BATCH_CHUNK, sizeof(*zeros));
	if (!keys || !zeros) {
		err = -ENOMEM;
		goto cleanup;
	}
	row = rule_slots(d);
	for (cpu = 0; cpu < d->ncpus; cpu++) {
		for (off = 0; off < n; off += cnt) {
			cnt = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
			for (i = 0; i < cnt; i++)
				keys[i] = (__u32)cpu * row + first + off + i;
			err = batch_apply(map_fd(d, DPP_MAP_RULE_STATS), keys, sizeof(*keys), zeros,
					  sizeof(*zeros), cnt, BPF_ANY, &got);
			if (err) {
				pr_warn("clear rule counters from slot %u: %s", first + off + got,
					strerror(-err));
				goto cleanup;
			}
		}
	}
cleanup:
	free(keys);
	free(zeros);
	return err;
}

int dpp_stats_verdicts(struct dpp *d, struct dpp_counter out[DPP_VERDICT_MAX])
{
	if (!d)
		return -EINVAL;
	return counters_read(d, DPP_MAP_VERDICTS, out, DPP_VERDICT_MAX);
}

int dpp_stats_actions(struct dpp *d, struct dpp_counter out[DPP_ACTION_MAX])
{
	if (!d)
		return -EINVAL;
	return counters_read(d, DPP_MAP_ACTIONS, out, DPP_ACTION_MAX);
}

int dpp_stats_reasons(struct dpp *d, struct dpp_counter out[DPP_REASON_MAX])
{
	if (!d)
		return -EINVAL;
	return counters_read(d, DPP_MAP_REASONS, out, DPP_REASON_MAX);
}

int dpp_stats_cpus(struct dpp *d, struct dpp_counter *out, __u32 n)
{
	__u32 readable;

	if (!d || (n && !out))
		return -EINVAL;
	if (!n)
		return 0;
	if (n > DPP_MAX_CPUS) {
		pr_warn("%u CPU counters asked for, at most %d", n, DPP_MAX_CPUS);
		return -ERANGE;
	}
	/* The CPUMAP takes no CPU the kernel cannot have: the rest are zero without a syscall. */
	readable = n < (__u32)d->ncpus ? n : (__u32)d->ncpus;
	memset(out + readable, 0, (size_t)(n - readable) * sizeof(*out));
	return counters_read(d, DPP_MAP_CPU_STATS, out, readable);
}
