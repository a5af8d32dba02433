// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Generic tables: update, lookup, delete and dump any plain map of the object by its name, n
 * elements per call, with the kernel's batch operations where the map type has them and one
 * syscall per element where not. A map a module declares (rules_maps, ...) has a protocol to its
 * writes and is refused for update and delete; every other map is a table. A write to a map the
 * entry's functions' word stands for (functions.c) brings the word up to date. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

enum cursor_state {
	CURSOR_START, /* zeroed by the caller */
	CURSOR_BATCH, /* token: the kernel's batch position */
	CURSOR_EACH,  /* token: the last key returned */
	CURSOR_END,
};

struct table {
	const char *name;
	struct dpp_map_ref *map;
	int fd;
	__u32 key_size;
	__u32 value_size; /* per element in the caller's array: per-CPU values for every CPU */
};

static bool per_cpu(__u32 type)
{
	return type == BPF_MAP_TYPE_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
	       type == BPF_MAP_TYPE_LRU_PERCPU_HASH || type == BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE;
}

/* The map's type and sizes, asked of the kernel once per map (kept in its ref). */
static int map_info_of(struct dpp_map_ref *m)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int err;

	if (m->info_known)
		return 0;
	err = bpf_obj_get_info_by_fd(m->fd, &info, &len);
	if (err) {
		pr_warn("table %s: get info: %s", m->name, strerror(-err));
		return err;
	}
	m->type = info.type;
	m->key_size = info.key_size;
	m->value_size = info.value_size;
	m->info_known = true;
	return 0;
}

/* The map by name, its sizes checked against the caller's; write: refuse maps with a protocol. */
static int table_open(struct dpp *d, const char *name, bool write, size_t ksz, size_t vsz,
		      struct table *t)
{
	struct dpp_map_ref *m;
	int err;

	if (!d || !name)
		return -EINVAL;
	m = map_find(d, name);
	if (!m) {
		pr_warn("table %s: no map of that name in the instance", name);
		return -ENOENT;
	}
	if (write && map_declared(name)) {
		pr_warn("table %s: written only through libdpp's calls for it, not as a table", name);
		return -EPERM;
	}
	err = map_info_of(m);
	if (err)
		return err;
	/* The tail-call slots switch with the programs in dpp_upgrade, never one by one. */
	if (write && m->type == BPF_MAP_TYPE_PROG_ARRAY) {
		pr_warn("table %s: holds programs, replaced only by dpp_upgrade", name);
		return -EPERM;
	}
	/* A ring has no elements: the programs produce into it, its consumer reads it. */
	if (write && m->type == BPF_MAP_TYPE_RINGBUF) {
		pr_warn("table %s: a ring, read by its consumer, never written as a table", name);
		return -EPERM;
	}
	/* Not declared (an instance pinned before it has none), but a write of its value from here
	 * would cancel the timer it holds (bpf/nf/qos/clock.h). */
	if (write && !strcmp(name, DPP_CLOCK_MAP)) {
		pr_warn("table %s: holds the policers' clock timer, which a write cancels", name);
		return -EPERM;
	}
	t->name = m->name;
	t->map = m;
	t->fd = m->fd;
	t->key_size = m->key_size;
	t->value_size = per_cpu(m->type) ? ((m->value_size + 7) & ~7U) * (__u32)d->ncpus
					 : m->value_size;
	if (ksz != t->key_size || (vsz && vsz != t->value_size)) {
		pr_warn("table %s: key %zu value %zu bytes given, the map has key %u value %u%s", name,
			ksz, vsz, t->key_size, t->value_size,
			d->reused ? ": the ABI changed, unpin the instance and load it again" : "");
		return -EINVAL;
	}
	return 0;
}

/* BPF_F_LOCK for a map whose values hold a bpf_spin_lock (FRER's recovery slots), so that a value
 * is read and written whole while the data path holds the lock; 0 for any other map. The kernel
 * refuses the flag (EINVAL) for a map without a lock before it looks at the key, so one lookup of
 * `key` (into a buffer of one value, made for it) tells, once per map; -ENOMEM if none can be. */
static int table_lock_flag(const struct table *t, const void *key, __u64 *flag)
{
	void *probe;
	int err;

	if (t->map->lock == DPP_MAP_LOCK_UNKNOWN) {
		probe = malloc(t->value_size);
		if (!probe)
			return -ENOMEM;
		err = bpf_map_lookup_elem_flags(t->fd, key, probe, BPF_F_LOCK);
		free(probe);
		t->map->lock = err == -EINVAL ? DPP_MAP_LOCK_NONE : DPP_MAP_LOCK_SPIN;
	}
	*flag = t->map->lock == DPP_MAP_LOCK_SPIN ? BPF_F_LOCK : 0;
	return 0;
}

/* After a write (maybe a partial one) to a table the entry's functions' word stands for. */
static int table_written(struct dpp *d, const struct table *t, int err)
{
	int e = t->map && functions_map(t->name) ? functions_refresh(d) : 0;

	return err ?: e;
}

int dpp_table_update(struct dpp *d, const char *name, const void *keys, size_t key_size,
		     const void *values, size_t value_size, __u32 n, __u64 flags, __u32 *done)
{
	struct table t = {};
	__u32 applied = 0;
	__u64 lock = 0;
	int err;

	if (n && (!keys || !values || !value_size))
		return -EINVAL;
	err = table_open(d, name, true, key_size, value_size, &t);
	if (!err && n)
		err = table_lock_flag(&t, keys, &lock);
	if (!err && n) {
		err = batch_apply(t.fd, keys, key_size, values, value_size, n, flags | lock,
				  &applied);
		if (err)
			pr_warn("table %s: update: %s after %u of %u", name, strerror(-err),
				applied, n);
	}
	if (done)
		*done = applied;
	return table_written(d, &t, err);
}

/* The keys and values of a fill: row r's slot of index i is r * stride + i, row 0's slots first,
 * each in the indexes' order; every value the same bytes. 0, or -ERANGE for an index past a row,
 * -ENOMEM. The caller frees *keys and *values. */
static int fill_batch(const __u32 *indexes, __u32 n, __u32 stride, __u32 rows, const void *value,
		      size_t value_size, __u32 **keys, char **values)
{
	__u32 r, i, at = 0;

	for (i = 0; i < n; i++)
		if (indexes[i] >= stride)
			return -ERANGE;
	*keys = malloc((size_t)n * rows * sizeof(**keys));
	*values = malloc((size_t)n * rows * value_size);
	if (!*keys || !*values)
		return -ENOMEM;
	for (r = 0; r < rows; r++)
		for (i = 0; i < n; i++, at++) {
			(*keys)[at] = r * stride + indexes[i];
			memcpy(*values + (size_t)at * value_size, value, value_size);
		}
	return 0;
}

int dpp_table_fill(struct dpp *d, const char *name, const __u32 *indexes, __u32 n, __u32 stride,
		   __u32 rows, const void *value, size_t value_size, __u32 *done)
{
	__u32 applied = 0, *keys = NULL;
	char *values = NULL;
	struct table t = {};
	__u64 lock = 0;
	int err;

	if (n && (!indexes || !value || !value_size || !rows || (__u64)stride * rows > UINT32_MAX ||
		  (__u64)n * rows > UINT32_MAX))
		return -EINVAL;
	err = table_open(d, name, true, sizeof(__u32), value_size, &t);
	if (!err && n)
		err = fill_batch(indexes, n, stride, rows, value, value_size, &keys, &values);
	if (!err && n)
		err = table_lock_flag(&t, keys, &lock);
	if (!err && n) {
		err = batch_apply(t.fd, keys, sizeof(*keys), values, value_size, n * rows,
				  BPF_ANY | lock, &applied);
		if (err)
			pr_warn("table %s: fill: %s after %u of %u", name, strerror(-err), applied,
				n * rows);
	}
	free(keys);
	free(values);
	if (done)
		*done = applied;
	return table_written(d, &t, err);
}

int dpp_table_delete(struct dpp *d, const char *name, const void *keys, size_t key_size, __u32 n,
		     __u32 *done)
{
	struct table t = {};
	__u32 applied = 0;
	int err;

	if (n && !keys)
		return -EINVAL;
	err = table_open(d, name, true, key_size, 0, &t);
	if (!err && n) {
		err = batch_apply(t.fd, keys, key_size, NULL, 0, n, 0, &applied);
		if (err)
			pr_warn("table %s: delete: %s after %u of %u", name, strerror(-err),
				applied, n);
	}
	if (done)
		*done = applied;
	return table_written(d, &t, err);
}

/* An array's keys read together when they lie close (at most SPAN_SLACK slots a key apart on
 * average): the kernel's lookup batch walks an array from an index, so the span [lowest, highest]
 * is one syscall where each key would be one (a group of TEIDs the UPF chose, next to each other). */
#define SPAN_SLACK 2
#define SPAN_MIN_KEYS 4

/* The span of keys within an array, or false when they are few or spread out. */
static bool array_span(const struct table *t, const __u32 *keys, __u32 n, __u64 lock, __u32 *low,
		       __u32 *count)
{
	__u32 i, lo, hi;

	if (t->map->type != BPF_MAP_TYPE_ARRAY || lock || n < SPAN_MIN_KEYS)
		return false;
	lo = hi = keys[0]; /* only now: with no keys, `keys` may be NULL */
	for (i = 1; i < n; i++) {
		lo = keys[i] < lo ? keys[i] : lo;
		hi = keys[i] > hi ? keys[i] : hi;
	}
	if ((__u64)hi - lo >= (__u64)n * SPAN_SLACK)
		return false;
	*low = lo;
	*count = hi - lo + 1;
	return true;
}

/* The keys' values out of one batch read of their span; the number found (an index past the
 * array's end is not), -ENOMEM, or the kernel's error (the caller then reads key by key). */
static int lookup_span(const struct table *t, const __u32 *keys, __u32 n, __u32 low, __u32 count,
		       char *values, size_t value_size, __u8 *found)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts);
	__u32 prev = low - 1, next, got = count, i, at;
	char *read = malloc((size_t)count * value_size);
	__u32 *indexes = malloc((size_t)count * sizeof(*indexes));
	int err = read && indexes ? 0 : -ENOMEM, hits = 0;
	bool hit;

	/* The batch cursor is the last key already read: NULL starts at index 0. */
	if (!err)
		err = bpf_map_lookup_batch(t->fd, low ? &prev : NULL, &next, indexes, read, &got, &bopts);
	if (err == -ENOENT) /* the array ended within the span: the keys past it are not found */
		err = 0;
	for (i = 0; !err && i < n; i++) {
		/* the index read there checked: past the array's end the kernel walks on from index 0 */
		at = keys[i] - low;
		hit = at < got && indexes[at] == keys[i];
		if (found)
			found[i] = hit;
		if (hit)
			memcpy(values + (size_t)i * value_size, read + (size_t)at * value_size, value_size);
		else
			memset(values + (size_t)i * value_size, 0, value_size);
		hits += hit;
	}
	free(read);
	free(indexes);
	return err ? err : hits;
}

/* One syscall per key, but an array's keys that lie close: the kernel's lookup batch walks the map,
 * it does not take keys. */
int dpp_table_lookup(struct dpp *d, const char *name, const void *keys, size_t key_size,
		     void *values, size_t value_size, __u32 n, __u8 *found)
{
	const char *k = keys;
	char *v = values;
	struct table t;
	int err, hits = 0;
	__u32 i, low, count;
	__u64 lock = 0;
	bool hit;

	if (n && (!keys || !values || !value_size))
		return -EINVAL;
	err = table_open(d, name, false, key_size, value_size, &t);
	if (!err && n)
		err = table_lock_flag(&t, k, &lock);
	if (!err && array_span(&t, keys, n, lock, &low, &count)) {
		hits = lookup_span(&t, keys, n, low, count, values, value_size, found);
		if (hits >= 0 || hits == -ENOMEM)
			return hits;
		hits = 0; /* the batch refused: key by key */
	}
	for (i = 0; !err && i < n; i++) {
		err = bpf_map_lookup_elem_flags(t.fd, k + i * key_size, v + i * value_size, lock);
		hit = !err;
		if (err == -ENOENT) {
			memset(v + i * value_size, 0, value_size);
			err = 0;
		}
		hits += hit;
		if (found)
			found[i] = hit;
	}
	if (err && i)
		pr_warn("table %s: lookup: %s at key %u of %u", name, strerror(-err), i - 1, n);
	return err ? err : hits;
}

int dpp_table_held(struct dpp *d, const char *name, const void *keys, size_t key_size,
		   size_t value_size, __u32 n, __u32 flag_at, __u8 flag)
{
	__u8 *values, *found;
	__u32 i = 0;
	int err;

	if (n && (!keys || !value_size || (flag && flag_at >= value_size) || n > INT_MAX))
		return -EINVAL;
	if (!n)
		return 0;
	/* The values and their found bytes in one buffer: a size that would wrap is refused, not
	 * allocated short and then written past. */
	if (value_size > (SIZE_MAX - n) / n)
		return -EOVERFLOW;
	values = malloc((size_t)n * value_size + n);
	if (!values)
		return -ENOMEM;
	found = values + (size_t)n * value_size;
	err = dpp_table_lookup(d, name, keys, key_size, values, value_size, n, found);
	for (; err >= 0 && i < n; i++)
		if (found[i] && (!flag || values[(size_t)i * value_size + flag_at] & flag))
			break;
	free(values);
	return err < 0 ? err : (int)i;
}

/* Through BPF_MAP_LOOKUP_BATCH. Returns the count, or -errno; -ENOENT from the kernel is the end. */
static int dump_batch(const struct table *t, struct dpp_table_cursor *c, void *keys, void *values,
		      __u32 n)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts);
	__u8 next[DPP_TABLE_TOKEN_MAX] = {};
	__u32 cnt = n;
	int err;

	err = bpf_map_lookup_batch(t->fd, c->state == CURSOR_START ? NULL : c->token, next, keys,
				   values, &cnt, &bopts);
	if (err == -ENOENT) {
		c->state = CURSOR_END;
		return (int)cnt;
	}
	if (err)
		return err;
	memcpy(c->token, next, sizeof(next));
	c->state = CURSOR_BATCH;
	return (int)cnt;
}

/* One key at a time (BPF_MAP_GET_NEXT_KEY), for map types without batch lookups. An entry deleted
 * between its key and its value is skipped. */
static int dump_each(const struct table *t, struct dpp_table_cursor *c, char *keys, char *values,
		     __u32 n)
{
	__u32 got = 0;
	int err = 0;

	while (got < n) {
		err = bpf_map_get_next_key(t->fd, c->state == CURSOR_EACH ? c->token : NULL,
					   keys + got * t->key_size);
		if (err == -ENOENT) {
			c->state = CURSOR_END;
			return (int)got;
		}
		if (err)
			return err;
		memcpy(c->token, keys + got * t->key_size, t->key_size);
		c->state = CURSOR_EACH;
		err = bpf_map_lookup_elem(t->fd, c->token, values + got * t->value_size);
		if (err == -ENOENT)
			continue;
		if (err)
			return err;
		got++;
	}
	return (int)got;
}

int dpp_table_dump(struct dpp *d, const char *name, struct dpp_table_cursor *cursor, void *keys,
		   size_t key_size, void *values, size_t value_size, __u32 n)
{
	struct table t;
	int got;

	if (!cursor || !n || !keys || !values || !value_size)
		return -EINVAL;
	got = table_open(d, name, false, key_size, value_size, &t);
	if (got)
		return got;
	if (t.key_size > DPP_TABLE_TOKEN_MAX)
		return -E2BIG;
	if (cursor->state == CURSOR_END)
		return 0;
	if (cursor->state == CURSOR_START || cursor->state == CURSOR_BATCH) {
		got = dump_batch(&t, cursor, keys, values, n);
		if (got >= 0 || cursor->state != CURSOR_START || !batch_unsupported(got))
			goto out;
	}
	got = dump_each(&t, cursor, keys, values, n);
out:
	if (got < 0)
		pr_warn("table %s: dump: %s", name, strerror(-got));
	return got;
}

/* The map of maps `name` opened for its entry `index`: the outer's fd and key checked. */
static int outer_open(struct dpp *d, const char *name, bool write, struct table *t)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int err;

	/* the type first: a map pinned by an older layout may have had other value sizes */
	err = table_open(d, name, write, sizeof(__u32), 0, t);
	if (err)
		return err;
	err = bpf_obj_get_info_by_fd(t->fd, &info, &len);
	if (!err && info.type != BPF_MAP_TYPE_ARRAY_OF_MAPS && info.type != BPF_MAP_TYPE_HASH_OF_MAPS) {
		pr_warn("table %s: not a map of maps%s", name,
			d->reused ? ": the ABI changed, unpin the instance and load it again" : "");
		err = -EINVAL;
	}
	return err;
}

int dpp_table_inner_set(struct dpp *d, const char *name, __u32 index, __u32 inner_type,
			__u32 max_entries, const void *keys, size_t key_size, const void *values,
			size_t value_size, __u32 n)
{
	__u32 applied = 0;
	struct table t;
	int inner, err;

	if (n && (!keys || !values || !key_size || !value_size))
		return -EINVAL;
	err = outer_open(d, name, true, &t);
	if (err)
		return err;
	inner = bpf_map_create(inner_type, "dpp_inner", key_size, value_size, max_entries, NULL);
	if (inner < 0) {
		pr_warn("table %s[%u]: create its inner map: %s", name, index, strerror(-inner));
		return inner;
	}
	err = batch_apply(inner, keys, key_size, values, value_size, n, BPF_ANY, &applied);
	if (err)
		pr_warn("table %s[%u]: fill its inner map: %s after %u of %u", name, index,
			strerror(-err), applied, n);
	else if ((err = bpf_map_update_elem(t.fd, &index, &inner, BPF_ANY)))
		pr_warn("table %s[%u]: put its inner map in: %s", name, index, strerror(-err));
	close(inner); /* the outer map holds it from now on, or no one does */
	return err;
}

int dpp_table_inner_lookup(struct dpp *d, const char *name, __u32 index, const void *keys,
			   size_t key_size, void *values, size_t value_size, __u32 n, __u8 *found)
{
	const char *k = keys;
	char *v = values;
	int err, inner, hits = 0;
	struct table t;
	__u32 id, i;

	if (n && (!keys || !values || !value_size))
		return -EINVAL;
	err = outer_open(d, name, false, &t);
	if (err)
		return err;
	err = bpf_map_lookup_elem(t.fd, &index, &id);
	if (err)
		return err; /* -ENOENT: the entry leads to no map */
	inner = bpf_map_get_fd_by_id(id);
	if (inner < 0) {
		pr_warn("table %s[%u]: open its inner map %u: %s", name, index, id, strerror(-inner));
		return inner;
	}
	for (i = 0; !err && i < n; i++) {
		err = bpf_map_lookup_elem(inner, k + i * key_size, v + i * value_size);
		if (err == -ENOENT) {
			memset(v + i * value_size, 0, value_size);
			if (found)
				found[i] = 0;
			err = 0;
			continue;
		}
		if (!err) {
			hits++;
			if (found)
				found[i] = 1;
		}
	}
	if (err)
		pr_warn("table %s[%u]: lookup in its inner map: %s", name, index, strerror(-err));
	close(inner);
	return err ? err : hits;
}

/* The kernel waits for every running BPF program (synchronize_rcu) when it has changed an entry of a
 * map of maps, so that user space knows no program still uses the entry's old map: the wait is
 * that of a throwaway map of maps, its one entry set. */
int dpp_table_wait_readers(struct dpp *d)
{
	LIBBPF_OPTS(bpf_map_create_opts, opts);
	int inner, outer, err;
	__u32 zero = 0;

	if (!d)
		return -EINVAL;
	inner = bpf_map_create(BPF_MAP_TYPE_ARRAY, "dpp_wait_inner", sizeof(__u32), sizeof(__u32), 1,
			       NULL);
	if (inner < 0) {
		pr_warn("wait for the programs' runs: create a map: %s", strerror(-inner));
		return inner;
	}
	opts.inner_map_fd = inner;
	outer = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "dpp_wait", sizeof(__u32), sizeof(__u32), 1,
			       &opts);
	err = outer < 0 ? outer : bpf_map_update_elem(outer, &zero, &inner, BPF_ANY);
	if (err)
		pr_warn("wait for the programs' runs: %s", strerror(-err));
	if (outer >= 0)
		close(outer);
	close(inner);
	return err;
}
