/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Classifier: tuple-space search over the active shape set, optionally fronted by a per-flow cache.
 * Cost depends on the number of shapes (at most DPP_MAX_SHAPES), never on the number of rules. */
#ifndef DPP_CLASSIFY_H
#define DPP_CLASSIFY_H

#include "dpp_maps.h"

/* Load-time knob (skeleton rodata): consult dpp_flows before searching the shapes. */
const volatile __u8 cfg_flow_cache = 1;

/* The cache pays off only when a miss would cost more than one hash lookup. */
#define DPP_CACHE_MIN_SHAPES 2

#define KEY_WORDS (sizeof(struct dpp_flow_key) / sizeof(__u32))

/* The key a rule of this shape would have: masked fields, and the shape's id (which the mask
 * carries in .shape) so that rules of different shapes never share a key. */
static __always_inline void key_mask(struct dpp_flow_key *out, const struct dpp_flow_key *key,
				     const struct dpp_flow_key *mask)
{
	const __u32 *k = (const __u32 *)key, *m = (const __u32 *)mask;
	__u32 *o = (__u32 *)out;
	int i;

#pragma unroll
	for (i = 0; i < (int)KEY_WORDS; i++)
		o[i] = k[i] & m[i];
	out->shape = mask->shape;
}

/* Highest-priority rule whose shape-masked key equals the packet's. Shapes come ordered by their
 * max_priority, so the search stops once no later shape can beat the best match. */
static __always_inline struct dpp_rule *search_shapes(const struct dpp_flow_key *key,
						      const struct dpp_shape_set *set)
{
	struct dpp_rule *best = NULL, *rule;
	struct dpp_flow_key masked;
	__u32 i, count = set->count;

	for (i = 0; i < DPP_MAX_SHAPES; i++) {
		const struct dpp_shape *shape = &set->shapes[i];

		if (i >= count || (best && best->priority >= shape->max_priority))
			break;
		key_mask(&masked, key, &shape->mask);
		rule = bpf_map_lookup_elem(&dpp_rules, &masked);
		if (rule && (!best || rule->priority > best->priority))
			best = rule;
	}
	return best;
}

/* The rule for this packet, or NULL. *out receives a copy when it came from the flow cache. */
static __always_inline const struct dpp_rule *classify(const struct dpp_flow_key *key,
						       const struct dpp_config *cfg,
						       struct dpp_rule *out)
{
	struct dpp_flow_entry *cached, fresh = {};
	const struct dpp_shape_set *set;
	struct dpp_rule *rule;
	__u32 slot = cfg->shape_set & 1;
	bool use_cache;

	set = bpf_map_lookup_elem(&dpp_shapes, &slot);
	if (!set || !set->count)
		return NULL;

	use_cache = cfg_flow_cache && set->count >= DPP_CACHE_MIN_SHAPES;
	if (use_cache) {
		cached = bpf_map_lookup_elem(&dpp_flows, key);
		if (cached && cached->generation == cfg->generation) {
			if (!cached->matched)
				return NULL;
			*out = cached->rule;
			return out;
		}
	}

	rule = search_shapes(key, set);
	if (use_cache) {
		fresh.generation = cfg->generation;
		if (rule) {
			fresh.matched = 1;
			fresh.rule = *rule;
		}
		bpf_map_update_elem(&dpp_flows, key, &fresh, BPF_ANY);
	}
	return rule;
}

#endif /* DPP_CLASSIFY_H */
