/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Shape filters: which bits of a shape's filter a masked key sets, and where they sit. The one
 * definition for the program (which tests them before probing dpp_rules) and libdpp (which sets
 * and clears them as rules come and go). */
#ifndef DPP_CORE_FILTER_H
#define DPP_CORE_FILTER_H

#include <linux/types.h>
#include "structs.h"

_Static_assert(DPP_MAX_FILTERS == 2 * DPP_MAX_SHAPES, "a filter for every shape of both shape sets");

#define DPP_FILTER_LANES ((sizeof(struct dpp_flow_key) - sizeof(__u32)) / sizeof(__u64))

_Static_assert(DPP_FILTER_LANES == 7 && sizeof(struct dpp_flow_key) == 7 * sizeof(__u64) + sizeof(__u32),
	       "dpp_filter_hash covers the key as seven 64-bit lanes and its last word");
_Static_assert(__builtin_offsetof(struct dpp_flow_key, shape) == 7 * sizeof(__u64) &&
		       __builtin_offsetof(struct dpp_flow_key, tunnel_dst) == sizeof(struct dpp_flow_key) - 1,
	       "the key's last word is .shape and the tunnel ids");

/* The key's last word, read whole: .shape and the tunnel ids beside it (the lanes end before it). */
static inline __u32 dpp_key_tail(const struct dpp_flow_key *key)
{
	return ((const __u32 *)key)[2 * DPP_FILTER_LANES];
}

/* A hash of a masked key (.shape set, the tunnel ids as masked): a sum of independent products, one odd constant per lane,
 * so that the CPU multiplies the lanes in parallel (the program computes it once per shape
 * searched), then a multiply-xorshift that carries every bit into the bits the filter uses. A key
 * differing in one lane differs in the sum (odd constants are invertible modulo 2^64). */
static inline __u64 dpp_filter_hash(const struct dpp_flow_key *key)
{
	const __u64 *lane = (const __u64 *)key;
	__u64 h = (__u64)dpp_key_tail(key) * 0xbf58476d1ce4e5b9ULL;

	h += lane[0] * 0x9e3779b97f4a7c15ULL + lane[1] * 0xc2b2ae3d27d4eb4fULL;
	h += lane[2] * 0x165667b19e3779f9ULL + lane[3] * 0xd6e8feb86659fd93ULL;
	h += lane[4] * 0xff51afd7ed558ccdULL + lane[5] * 0xc4ceb9fe1a85ec53ULL;
	h += lane[6] * 0x94d049bb133111ebULL;
	h ^= h >> 32;
	h *= 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/* The filter word a hash selects, within a shape's DPP_FILTER_WORDS. */
static inline __u32 dpp_filter_word(__u64 hash)
{
	return (__u32)(hash >> 20) & (DPP_FILTER_WORDS - 1);
}

/* The two bits of that word the hash sets (they may coincide). */
static inline __u64 dpp_filter_bits(__u64 hash)
{
	return (1ULL << (hash & 63)) | (1ULL << ((hash >> 6) & 63));
}

#endif /* DPP_CORE_FILTER_H */
