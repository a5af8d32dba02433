/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classifier: tuple-space search over the active shape set, optionally fronted by a direct-mapped
 * per-CPU flow cache. Cost depends on the number of shapes (at most DPP_MAX_SHAPES), never on the
 * number of rules. */
#ifndef DPP_CORE_CLASSIFY_H
#define DPP_CORE_CLASSIFY_H

#include "core/maps.h"
#include "core/parse.h"
#include "core/key.h"
#include "dpp/core/filter.h"

/* Load-time knob (skeleton rodata): consult dpp_flows before searching the shapes. */
const volatile __u8 cfg_flow_cache = 1;

/* Load-time knob (skeleton rodata): slots of a CPU's row of dpp_flows, a power of two. libdpp writes
 * max_entries here, so a slot is a mask of the hash, never out of range, never a division. */
const volatile __u32 cfg_flow_slots = DPP_MAX_FLOWS;

_Static_assert((DPP_MAX_FLOWS & (DPP_MAX_FLOWS - 1)) == 0, "DPP_MAX_FLOWS must be a power of two");

/* Shapes from which the cache is consulted. A hit (hash, one array slot, a 60-byte compare) costs
 * less than even one lookup of the 60-byte key in dpp_rules (measured: about 14 ns less), a miss
 * about 6 ns more, so even one shape gains from it once over 30% of packets hit. */
#define DPP_CACHE_MIN_SHAPES 1

/* The flow cache reads a packet's key as 64-bit lanes, and its last word (.shape, 0 in a packet's
 * key, and the tunnel ids) alone. */
#define KEY_LANES ((KEY_WORDS - 1) / 2)
#define FLOW_HASH_MUL 0x9e3779b97f4a7c15ULL /* 2^64 / golden ratio, odd */

_Static_assert(KEY_WORDS == 2 * KEY_LANES + 1, "the lanes cover every word of the key but the last");
_Static_assert(__builtin_offsetof(struct dpp_flow_key, shape) == 8 * KEY_LANES,
	       ".shape is the key's last word");
/* Lanes are loaded whole, which needs 8-byte alignment (the verifier refuses misaligned stack
 * reads): the packet's key starts struct dpp_parse, which is 8-byte aligned (parse.h), and the key
 * of a cache entry sits at an 8-byte offset of its map value. */
_Static_assert(__builtin_offsetof(struct dpp_parse, key) == 0 && _Alignof(struct dpp_parse) >= 8,
	       "a packet's key is 8-byte aligned");
_Static_assert(__builtin_offsetof(struct dpp_flow_entry, key) % 8 == 0,
	       "a cached key is 8-byte aligned");

/* False when no rule of the shape can have this masked key: its filter lacks one of the key's bits.
 * The filter of a shape with few rules sits in a few KiB the CPU keeps cached, so a shape that
 * cannot match costs a hash and a cached word instead of a cold hash-table bucket. */
static __always_inline bool filter_may_match(__u32 filter, const struct dpp_flow_key *masked)
{
	__u64 hash = dpp_filter_hash(masked), bits = dpp_filter_bits(hash), *word;
	__u32 index = (filter - 1) * DPP_FILTER_WORDS + dpp_filter_word(hash);

	word = bpf_map_lookup_elem(&dpp_filters, &index);
	return !word || (*word & bits) == bits;
}

/* Highest-priority rule whose shape-masked key equals the packet's. Shapes come ordered by their
 * max_priority, so the search stops once no later shape can beat the best match. The masked key is
 * made in *room: search_shapes' stack, or a caller's map value where a program's stack is short
 * (ATSSS's stage, nf/atsss/flows.h). */
static __always_inline struct dpp_rule *search_shapes_in(const struct dpp_flow_key *key,
							 const struct dpp_shape_set *set,
							 struct dpp_flow_key *room)
{
	struct dpp_rule *best = NULL, *rule;
	__u32 i, count = set->count;

	for (i = 0; i < DPP_MAX_SHAPES; i++) {
		const struct dpp_shape *shape = &set->shapes[i];

		if (i >= count || (best && best->priority >= shape->max_priority))
			break;
		key_mask(room, key, &shape->mask);
		if (set->filters[i] && !filter_may_match(set->filters[i], room))
			continue;
		rule = bpf_map_lookup_elem(&dpp_rules, room);
		if (rule && (!best || rule->priority > best->priority))
			best = rule;
	}
	return best;
}

/* The search with the masked key in the caller's frame: the RSS dispatcher's (nf/qos/rss.h), which
 * the entry calls; a search called from it would add a third frame to that chain. */
static __always_inline struct dpp_rule *search_shapes(const struct dpp_flow_key *key,
						      const struct dpp_shape_set *set)
{
	struct dpp_flow_key masked;

	return search_shapes_in(key, set, &masked);
}

/* The entry's search, with the masked key in a frame of its own (a global function: verified
 * once): off the entry's frame, to which the calls below it (the UPF's SDF stage and its policer,
 * the RSS dispatcher) add theirs within 512 bytes also where the verifier rounds each frame to 32
 * (kernels before 6.9; bench/stack.py). A global function returns no pointer: the rule found is
 * copied to *out; 1 when there is one. */
__attribute__((noinline)) int dpp_search_shapes(const struct dpp_flow_key *key,
						const struct dpp_shape_set *set, struct dpp_rule *out)
{
	struct dpp_flow_key masked;
	struct dpp_rule *rule;

	if (!key || !set || !out)
		return 0;
	rule = search_shapes_in(key, set, &masked);
	if (!rule)
		return 0;
	*out = *rule;
	return 1;
}

/* The dpp_flows slot of a packet's key: multiply-xor over its 64-bit lanes, high half of the
 * product, masked to the power-of-two slot count.
 *
 * Why this is good enough: multiplying by an odd constant is a bijection that carries every input
 * bit into all higher bits, and xoring each lane in before the next multiply makes the hash depend
 * on where a value sits (a plain xor fold would, for one, give a flow and its reverse the same
 * slot). The slot is taken from the high half of the last product, whose bits depend on every bit
 * of every lane, so sequential UE addresses, ports or TEIDs, the usual way flows differ, spread over
 * all slots (flows that differ only in their tunnel ids share a slot: the last word is not hashed,
 * but compared). It is not a keyed hash: someone who
 * knows it can make flows collide, but a collision only costs a search (the full key is compared),
 * so the worst case is the uncached pipeline, never a wrong rule. */
static __always_inline __u32 flow_slot(const struct dpp_flow_key *key)
{
	const __u64 *lane = (const __u64 *)key;
	__u64 h = 0;
	int i;

#pragma unroll
	for (i = 0; i < (int)KEY_LANES; i++)
		h = (h ^ lane[i]) * FLOW_HASH_MUL;
	return (__u32)(h >> 32) & (cfg_flow_slots - 1);
}

/* Lane by lane, without early exit: a hit compares every lane anyway. */
static __always_inline bool key_equal(const struct dpp_flow_key *a, const struct dpp_flow_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;
	__u64 diff = dpp_key_tail(a) ^ dpp_key_tail(b);
	int i;

#pragma unroll
	for (i = 0; i < (int)KEY_LANES; i++)
		diff |= x[i] ^ y[i];
	return !diff;
}

/* Overwrite a slot with this flow's classification (a miss or a collision: the newest flow wins).
 * The slot is invalidated first and validated last, so that a run interrupted half-way (only
 * possible where XDP is preemptible) leaves a slot that cannot hit, never a torn one that could. */
static __always_inline void flow_store(struct dpp_flow_entry *e, const struct dpp_flow_key *key,
				       const struct dpp_rule *rule, __u32 generation)
{
	e->generation = 0;
	barrier();
	e->key = *key;
	e->matched = rule != NULL;
	if (rule)
		e->rule = *rule;
	barrier();
	e->generation = generation;
}

_Static_assert((DPP_FLOW_USE_SAMPLE & (DPP_FLOW_USE_SAMPLE - 1)) == 0, "a mask of the packet count");

/* Whether this packet consults the flow cache. With many more active flows than slots nearly every
 * probe misses, and a miss costs the cold slot and its rewrite on top of the search (measured at
 * a million flows: 200-350 ns more than no cache). So each CPU measures its hit rate per window and
 * stops probing for the next window when it is too low, but for a sample that keeps measuring it:
 * the cache then costs a cached counter, and comes back by itself when the traffic's flows fit. */
static __always_inline bool flow_cache_pays(struct dpp_flow_use *use)
{
	if (use->packets >= DPP_FLOW_USE_WINDOW) {
		use->bypass = use->hits * 100 < use->probes * DPP_FLOW_USE_MIN_HIT_PCT;
		use->packets = use->probes = use->hits = 0;
	}
	use->packets++;
	if (use->bypass && (use->packets & (DPP_FLOW_USE_SAMPLE - 1)))
		return false;
	use->probes++;
	return true;
}

/* The rule for this packet, or NULL. *out receives a copy when it came from the flow cache, or from
 * the search when it was called (`search_called`: dpp_search_shapes). */
static __always_inline const struct dpp_rule *classify_by(const struct dpp_flow_key *key,
							  const struct dpp_config *cfg,
							  struct dpp_rule *out, bool search_called)
{
	struct dpp_flow_entry *cached = NULL;
	const struct dpp_shape_set *set;
	struct dpp_flow_use *use = NULL;
	struct dpp_rule *rule;
	__u32 set_slot = cfg->shape_set & 1, flow, zero = 0;

	set = bpf_map_lookup_elem(&dpp_shapes, &set_slot);
	if (!set || !set->count)
		return NULL;

	if (cfg_flow_cache && set->count >= DPP_CACHE_MIN_SHAPES)
		use = bpf_map_lookup_elem(&dpp_flow_use, &zero);
	if (use && flow_cache_pays(use)) {
		flow = bpf_get_smp_processor_id() * cfg_flow_slots + flow_slot(key);
		cached = bpf_map_lookup_elem(&dpp_flows, &flow);
		if (cached && cached->generation == cfg->generation && key_equal(&cached->key, key)) {
			use->hits++;
			if (!cached->matched)
				return NULL;
			*out = cached->rule;
			return out;
		}
	}

	if (search_called) {
		/* kernels before 6.3 check a global function's pointer argument as a read of
		 * initialised stack: the caller's rule is zeroed first, on misses only */
		__builtin_memset(out, 0, sizeof(*out));
		rule = dpp_search_shapes(key, set, out) ? out : NULL;
	} else {
		rule = search_shapes(key, set);
	}
	if (cached)
		flow_store(cached, key, rule, cfg->generation);
	return rule;
}

/* The RSS dispatcher's classification: the search in its frame (search_shapes). */
static __always_inline const struct dpp_rule *classify(const struct dpp_flow_key *key,
						       const struct dpp_config *cfg,
						       struct dpp_rule *out)
{
	return classify_by(key, cfg, out, false);
}

/* The entry's classification: the search in a frame of its own (dpp_search_shapes). */
static __always_inline const struct dpp_rule *classify_entry(const struct dpp_flow_key *key,
							     const struct dpp_config *cfg,
							     struct dpp_rule *out)
{
	return classify_by(key, cfg, out, true);
}

#endif /* DPP_CORE_CLASSIFY_H */
