// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Words of a mapped array's values stored in place (dpp_words_store): the control plane changes the
 * words it owns in a value whose other words the programs move meanwhile (counters, sequence
 * numbers), each by one atomic store, so that no program's update between a read and a write of
 * the whole value is lost. No instance: the mapping is the caller's (netapp.dataplane.tables). */
#include <errno.h>
#include <limits.h>
#include <stdint.h>

#include "libdpp_internal.h"

/* A word of a known width, aligned in memory (base's alignment counts too: a misaligned store is
 * not one store), within the mapping. */
static int word_check(const void *base, const struct dpp_word *w, size_t size)
{
	if ((w->width != 1 && w->width != 2 && w->width != 4 && w->width != 8) || w->reserved ||
	    ((uintptr_t)base + w->offset) % w->width)
		return -EINVAL;
	return w->offset > size || size - w->offset < w->width ? -ERANGE : 0;
}

/* One aligned store of the word's width, release order: the stores before it are seen first. */
static void word_store(char *base, const struct dpp_word *w)
{
	void *at = base + w->offset;

	switch (w->width) {
	case 8:
		__atomic_store_n((__u64 *)at, w->value, __ATOMIC_RELEASE);
		break;
	case 4:
		__atomic_store_n((__u32 *)at, (__u32)w->value, __ATOMIC_RELEASE);
		break;
	case 2:
		__atomic_store_n((__u16 *)at, (__u16)w->value, __ATOMIC_RELEASE);
		break;
	default:
		__atomic_store_n((__u8 *)at, (__u8)w->value, __ATOMIC_RELEASE);
	}
}

int dpp_words_store(void *base, size_t size, const struct dpp_word *words, __u32 n)
{
	__u32 i;
	int err;

	if (!base || (n && !words))
		return -EINVAL;
	if (n > INT_MAX) /* the count is returned as an int */
		return -E2BIG;
	for (i = 0; i < n; i++) {
		err = word_check(base, &words[i], size);
		if (err)
			return err;
	}
	for (i = 0; i < n; i++)
		word_store(base, &words[i]);
	return (int)n;
}
