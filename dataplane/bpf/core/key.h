/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A packet's flow key under a mask: what the classifier's shapes (core/classify.h) and FRER's IP
 * stream identification (nf/frer/identify.h) look up. No maps here: both take it as it is. */
#ifndef DPP_CORE_KEY_H
#define DPP_CORE_KEY_H

#include <linux/types.h>
#include "dpp/core/structs.h"

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

#endif /* DPP_CORE_KEY_H */
