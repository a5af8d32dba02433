/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* libdpp internal: the shape filters of an instance (dpp_filters, see dpp/core/filter.h). One
 * process writes an instance's rules at a time; it keeps here how many rules hold each bit. */
#ifndef DPP_FILTERS_H
#define DPP_FILTERS_H

#include <linux/types.h>
#include "dpp/dpp_structs.h"

struct dpp_filters;

/* Maps the dpp_filters map `map_fd` into memory. */
int filters_open(int map_fd, struct dpp_filters **out);
void filters_close(struct dpp_filters *f);

/* Count `n` rule keys in their shapes' filters and set their bits: before the rules are added. */
void filters_add(struct dpp_filters *f, const struct dpp_flow_key *keys, __u32 n);
/* Uncount them and clear bits no key holds any more: after the rules are gone (or were not new). */
void filters_sub(struct dpp_filters *f, const struct dpp_flow_key *keys, __u32 n);
/* Adopt filter `filter` (1-based) for `shape_id`: what a published shape set says it uses. */
void filters_adopt(struct dpp_filters *f, __u32 shape_id, __u32 filter);
/* The filter to publish `shape_id` with: 1-based, or 0 for none (no free filter, too many rules
 * for it to pay, or a new filter while some shape's keys could not be counted). */
__u32 filters_for_shape(struct dpp_filters *f, __u32 shape_id);
/* Frees the filters of shapes with no rules that neither of `n` published shape ids names. */
void filters_release(struct dpp_filters *f, const __u32 *keep, __u32 n);

#endif /* DPP_FILTERS_H */
