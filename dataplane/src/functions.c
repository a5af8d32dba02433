// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dpp_config.functions (enum dpp_functions): the one word the entry tests before it hands a packet
 * to FRER's stage, the GTP-U dispatcher or ATSSS's stage. libdpp derives it from those functions'
 * own maps, which stay what each function's control plane writes: after every table write to one of
 * them, when an instance is reopened, and in an upgrade before the links switch (upgrade.c). A
 * config pinned by a build without the word has its `reserved` word there, which that build's
 * libdpp wrote 0 and its programs never read or wrote; the word is computed whole from the maps,
 * never from what the config held, so nothing here relies on that 0. A function's map is written
 * before its bit is set, and cleared before its bit is:
 * the bit is never clear while the map says the function has work, and a set bit with an empty map
 * costs only the function's own test, which the entry still makes. */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

/* Whether the one-word gate map `name` (dpp_frer_gate, dpp_atsss_gate) is nonzero; an instance
 * without the map has no such function. */
static int word_set(const struct dpp *d, const char *name, bool *on)
{
	const struct dpp_map_ref *m = map_find(d, name);
	__u32 zero = 0, word = 0;

	*on = false;
	if (!m)
		return 0;
	if (bpf_map_lookup_elem(m->fd, &zero, &word))
		return -errno;
	*on = word != 0;
	return 0;
}

/* Whether an interface dispatches: a slot of dpp_rss_ifaces with workers. */
static int rss_dispatching(const struct dpp *d, bool *on)
{
	const struct dpp_map_ref *m = map_find(d, "dpp_rss_ifaces");
	struct dpp_rss_iface iface;
	__u32 slot;

	*on = false;
	for (slot = 0; m && slot < DPP_MAX_RSS_IFACES && !*on; slot++) {
		if (bpf_map_lookup_elem(m->fd, &slot, &iface))
			return -errno;
		*on = iface.workers != 0;
	}
	return 0;
}

/* The word the functions' maps call for. */
static int functions_wanted(const struct dpp *d, __u32 *functions)
{
	bool frer, rss, atsss;
	int err;

	err = word_set(d, "dpp_frer_gate", &frer);
	err = err ?: rss_dispatching(d, &rss);
	err = err ?: word_set(d, "dpp_atsss_gate", &atsss);
	*functions = (frer ? DPP_FUNCTION_FRER : 0) | (rss ? DPP_FUNCTION_RSS : 0) |
		     (atsss ? DPP_FUNCTION_ATSSS : 0);
	return err;
}

int functions_refresh(struct dpp *d)
{
	struct dpp_config cfg;
	__u32 functions;
	int err;

	config_lock(d);
	err = functions_wanted(d, &functions);
	err = err ?: config_read(d, &cfg);
	if (!err && cfg.functions != functions) {
		cfg.functions = functions;
		err = update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
	}
	config_unlock(d);
	if (err)
		pr_warn("dpp_config.functions: %s", strerror(-err));
	return err;
}

bool functions_map(const char *name)
{
	return !strcmp(name, "dpp_frer_gate") || !strcmp(name, "dpp_rss_ifaces") ||
	       !strcmp(name, "dpp_atsss_gate");
}
