// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Shape filters: a counting Bloom filter per shape, kept in this process, whose bits it writes
 * into the program's dpp_filters map (mapped into memory, so one word changes with one atomic
 * instruction). A bit is set while at least one rule key of the shape holds it, so the program
 * never skips a shape that has the packet's rule. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dpp/dpp_filter.h"
#include "filters.h"

#define FILTER_BITS (DPP_FILTER_WORDS * 64)

struct filter {
	__u32 shape_id; /* 0: free */
	__u32 rules;	/* rule keys counted */
	__u32 *counts;	/* per bit: rule keys holding it */
};

struct dpp_filters {
	volatile __u64 *words; /* the map, DPP_MAX_FILTERS * DPP_FILTER_WORDS */
	size_t mapped;
	bool untracked;	       /* some shape's keys found no free filter: none may be taken later */
	struct filter filters[DPP_MAX_FILTERS];
};

int filters_open(int map_fd, struct dpp_filters **out)
{
	size_t size = (size_t)DPP_MAX_FILTERS * DPP_FILTER_WORDS * sizeof(__u64);
	long page = sysconf(_SC_PAGESIZE);
	struct dpp_filters *f;
	void *words;

	size = (size + page - 1) / page * page;
	words = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, map_fd, 0);
	if (words == MAP_FAILED)
		return -errno;
	f = calloc(1, sizeof(*f));
	if (!f) {
		munmap(words, size);
		return -ENOMEM;
	}
	f->words = words;
	f->mapped = size;
	*out = f;
	return 0;
}

void filters_close(struct dpp_filters *f)
{
	int i;

	if (!f)
		return;
	for (i = 0; i < DPP_MAX_FILTERS; i++)
		free(f->filters[i].counts);
	munmap((void *)f->words, f->mapped);
	free(f);
}

static int filter_index(const struct dpp_filters *f, __u32 shape_id)
{
	int i;

	for (i = 0; i < DPP_MAX_FILTERS; i++)
		if (f->filters[i].shape_id == shape_id)
			return i;
	return -1;
}

/* The filter of a shape, taking a free one for a shape seen first; -1 when none is free (the
 * shape is then published without a filter). */
static int filter_take(struct dpp_filters *f, __u32 shape_id)
{
	int i = filter_index(f, shape_id);

	if (i >= 0 || !shape_id)
		return i;
	i = filter_index(f, 0);
	if (i < 0)
		return -1;
	f->filters[i].counts = calloc(FILTER_BITS, sizeof(__u32));
	if (!f->filters[i].counts)
		return -1;
	f->filters[i].shape_id = shape_id;
	f->filters[i].rules = 0;
	return i;
}

static volatile __u64 *filter_word(struct dpp_filters *f, int i, __u64 hash)
{
	return &f->words[(size_t)i * DPP_FILTER_WORDS + dpp_filter_word(hash)];
}

/* The bit numbers within the filter (word * 64 + bit) a hash sets: two, possibly equal. */
static void bit_numbers(__u64 hash, __u32 out[2])
{
	__u32 base = dpp_filter_word(hash) * 64;

	out[0] = base + (__u32)(hash & 63);
	out[1] = base + (__u32)((hash >> 6) & 63);
}

static void key_add(struct dpp_filters *f, const struct dpp_flow_key *key)
{
	int i = filter_take(f, key->shape), b;
	__u64 hash, set = 0;
	__u32 bits[2];

	if (i < 0) {
		f->untracked = true;
		return;
	}
	hash = dpp_filter_hash(key);
	bit_numbers(hash, bits);
	for (b = 0; b < 2; b++)
		if (f->filters[i].counts[bits[b]]++ == 0)
			set |= 1ULL << (bits[b] & 63);
	f->filters[i].rules++;
	if (set)
		__atomic_fetch_or(filter_word(f, i, hash), set, __ATOMIC_SEQ_CST);
}

static void key_sub(struct dpp_filters *f, const struct dpp_flow_key *key)
{
	int i = filter_index(f, key->shape), b;
	__u64 hash, clear = 0;
	__u32 bits[2];

	if (i < 0 || !key->shape || !f->filters[i].rules)
		return;
	hash = dpp_filter_hash(key);
	bit_numbers(hash, bits);
	for (b = 0; b < 2; b++)
		if (f->filters[i].counts[bits[b]] && --f->filters[i].counts[bits[b]] == 0)
			clear |= 1ULL << (bits[b] & 63);
	f->filters[i].rules--;
	if (clear)
		__atomic_fetch_and(filter_word(f, i, hash), ~clear, __ATOMIC_SEQ_CST);
}

void filters_add(struct dpp_filters *f, const struct dpp_flow_key *keys, __u32 n)
{
	__u32 k;

	for (k = 0; f && k < n; k++)
		key_add(f, &keys[k]);
}

void filters_sub(struct dpp_filters *f, const struct dpp_flow_key *keys, __u32 n)
{
	__u32 k;

	for (k = 0; f && k < n; k++)
		key_sub(f, &keys[k]);
}

void filters_adopt(struct dpp_filters *f, __u32 shape_id, __u32 filter)
{
	struct filter *slot;

	if (!f || !shape_id || !filter || filter > DPP_MAX_FILTERS || filter_index(f, shape_id) >= 0)
		return;
	slot = &f->filters[filter - 1];
	if (slot->shape_id)
		return;
	slot->counts = calloc(FILTER_BITS, sizeof(__u32));
	if (slot->counts)
		slot->shape_id = shape_id;
}

__u32 filters_for_shape(struct dpp_filters *f, __u32 shape_id)
{
	int i;

	if (!f)
		return 0;
	/* A filter taken now for a shape whose keys went uncounted would lack their bits. */
	i = f->untracked ? filter_index(f, shape_id) : filter_take(f, shape_id);
	if (i < 0 || f->filters[i].rules > DPP_FILTER_MAX_RULES)
		return 0;
	return (__u32)i + 1;
}

static bool kept(__u32 shape_id, const __u32 *keep, __u32 n)
{
	__u32 k;

	for (k = 0; k < n; k++)
		if (keep[k] == shape_id)
			return true;
	return false;
}

void filters_release(struct dpp_filters *f, const __u32 *keep, __u32 n)
{
	struct filter *slot;
	int i;

	for (i = 0; f && i < DPP_MAX_FILTERS; i++) {
		slot = &f->filters[i];
		if (!slot->shape_id || slot->rules || kept(slot->shape_id, keep, n))
			continue;
		/* No rule holds a bit of it: its words are all zero already. */
		free(slot->counts);
		memset(slot, 0, sizeof(*slot));
	}
}
