// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Rules: installed and deleted in batches, in order, with their keys counted into the shape
 * filters around each change. */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

const struct dpp_map_spec rules_maps[] = {
	DPP_MAP_SPEC(DPP_MAP_RULES, "dpp_rules", BPF_MAP_TYPE_HASH, struct dpp_flow_key,
		     struct dpp_rule),
	{},
};

/* One rule, new or replacing: *was_new says which, for the filter counts. */
static int rule_put(int fd, const struct dpp_flow_key *key, const struct dpp_rule *rule, bool *was_new)
{
	int err = bpf_map_update_elem(fd, key, rule, BPF_NOEXIST);

	*was_new = !err;
	if (err != -EEXIST)
		return err;
	err = bpf_map_update_elem(fd, key, rule, BPF_EXIST);
	if (err == -ENOENT) { /* deleted in between: new after all */
		err = bpf_map_update_elem(fd, key, rule, BPF_NOEXIST);
		*was_new = !err;
	}
	return err;
}

/* Adds rules in batches that only create (BPF_NOEXIST), so the keys that were there already,
 * where a batch stops, are known: they replace their rule one by one and are counted once in the
 * filters. *done: rules applied, in order. */
static int rules_insert(struct dpp *d, const struct dpp_flow_key *keys, const struct dpp_rule *rules,
			__u32 n, __u32 *done)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts, .elem_flags = BPF_NOEXIST);
	int fd = map_fd(d, DPP_MAP_RULES), err = 0;
	__u32 off = 0, want, cnt;
	bool was_new, batches = true;

	while (off < n) {
		want = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
		cnt = 0;
		if (batches) {
			cnt = want;
			err = bpf_map_update_batch(fd, keys + off, rules + off, &cnt, &bopts);
			cnt = batch_progress(err, want, cnt);
			batches = !(err && !cnt && batch_unsupported(err));
		}
		off += cnt;
		if (!err && cnt == want)
			continue;
		if (err && err != -EEXIST && batches)
			break;
		err = rule_put(fd, &keys[off], &rules[off], &was_new);
		if (err)
			break;
		if (!was_new)
			filters_sub(d->filters, &keys[off], 1);
		off++;
	}
	*done = off;
	return err;
}

int dpp_rules_upsert(struct dpp *d, const struct dpp_flow_key *keys, const struct dpp_rule *rules,
		     __u32 n, __u32 *done)
{
	__u32 applied = 0;
	int err = 0;

	if (!d || (n && (!keys || !rules)))
		return -EINVAL;
	err = filters_ready(d);
	if (err)
		return err;
	/* Bits first: the program never skips a shape for a key whose rule it could meet. */
	filters_add(d->filters, keys, n);
	if (n)
		err = rules_insert(d, keys, rules, n, &applied);
	filters_sub(d->filters, keys + applied, n - applied);
	if (err)
		pr_warn("install rules: %s after %u of %u", strerror(-err), applied, n);
	if (done)
		*done = applied;
	return err;
}

int dpp_rules_delete(struct dpp *d, const struct dpp_flow_key *keys, __u32 n, __u32 *done)
{
	__u32 applied = 0;
	int err = 0;

	if (!d || (n && !keys))
		return -EINVAL;
	err = filters_ready(d);
	if (!err && n)
		err = batch_apply(map_fd(d, DPP_MAP_RULES), keys, sizeof(*keys), NULL, 0, n, 0,
				  &applied);
	/* Bits last: they go only once no rule can be met with them. */
	filters_sub(d->filters, keys, applied);
	if (err)
		pr_warn("delete rules: %s after %u of %u", strerror(-err), applied, n);
	if (done)
		*done = applied;
	return err;
}

int dpp_rules_foreach(struct dpp *d, dpp_rule_cb cb, void *ctx)
{
	struct dpp_flow_key key, next;
	struct dpp_rule rule;
	void *prev = NULL;
	int fd, err;

	if (!d || !cb)
		return -EINVAL;
	fd = map_fd(d, DPP_MAP_RULES);
	for (;;) {
		err = bpf_map_get_next_key(fd, prev, &next);
		if (err)
			return err == -ENOENT ? 0 : err;
		err = bpf_map_lookup_elem(fd, &next, &rule);
		/* A rule deleted between the two calls is simply not reported. */
		if (err && err != -ENOENT)
			return err;
		if (!err) {
			err = cb(&next, &rule, ctx);
			if (err)
				return err;
		}
		key = next;
		prev = &key;
	}
}
