// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dppctl's commands that change an instance: attach (loading it first if need be), detach,
 * upgrade and unload. */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dppctl.h"
#include "dpp_names.h"

/* ---- argument parsing ---- */

static int parse_mode(const char *s, enum dpp_xdp_mode *mode)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(dpp_mode_names); i++) {
		if (!strcmp(s, dpp_mode_names[i])) {
			*mode = (enum dpp_xdp_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int parse_cpu(const char *s, char **end, unsigned long *cpu)
{
	errno = 0;
	*cpu = strtoul(s, end, 10);
	if (errno || *end == s || *cpu >= DPP_MAX_CPUS)
		return -EINVAL;
	return 0;
}

/* "0-3,6" into a membership array of DPP_MAX_CPUS. */
static int parse_cpus(const char *s, bool *cpus)
{
	unsigned long lo, hi, i;
	char *end;

	for (;;) {
		if (parse_cpu(s, &end, &lo))
			return -EINVAL;
		hi = lo;
		if (*end == '-' && parse_cpu(end + 1, &end, &hi))
			return -EINVAL;
		if (hi < lo)
			return -EINVAL;
		for (i = lo; i <= hi; i++)
			cpus[i] = true;
		if (*end == '\0')
			return 0;
		if (*end != ',')
			return -EINVAL;
		s = end + 1;
	}
}

static int iface_index(const char *name, int *ifindex)
{
	*ifindex = (int)if_nametoindex(name);
	if (!*ifindex)
		return fail(-errno, "interface '%s'", name);
	return 0;
}

/* ---- attach / detach / unload ---- */

static int cpus_enable(struct ctl *c, const bool *cpus)
{
	unsigned int cpu;
	int err;

	for (cpu = 0; cpu < DPP_MAX_CPUS; cpu++) {
		if (!cpus[cpu])
			continue;
		err = dpp_cpu_enable(c->d, cpu, 0, 0);
		if (err)
			return fail(err, "add CPU %u to the CPU set", cpu);
	}
	return 0;
}

static int attach_to(struct ctl *c, const char *iface, int ifindex, enum dpp_xdp_mode mode,
		     const bool *cpus)
{
	int rc, err;

	rc = cpus_enable(c, cpus);
	if (rc)
		return rc;
	err = dpp_attach(c->d, ifindex, mode);
	if (err)
		return fail(err, "attach instance '%s' to %s in %s mode", c->instance, iface,
			    dpp_mode_names[mode]);
	printf("instance '%s' (%s) attached to %s in %s mode\n", c->instance,
	       dpp_reused(c->d) ? "reused" : "loaded", iface, dpp_mode_names[mode]);
	return 0;
}

int cmd_attach(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interface", required_argument, NULL, 'i' },
		{ "mode", required_argument, NULL, 'm' },
		{ "cpus", required_argument, NULL, 'c' },
		{},
	};
	enum dpp_xdp_mode mode = DPP_XDP_MODE_NATIVE;
	bool cpus[DPP_MAX_CPUS] = {};
	const char *iface = NULL;
	int opt, ifindex, rc;

	while ((opt = getopt_long(argc, argv, "i:m:c:", opts, NULL)) != -1) {
		switch (opt) {
		case 'i':
			iface = optarg;
			break;
		case 'm':
			if (parse_mode(optarg, &mode))
				return usage_error("mode '%s': use native, generic or offload", optarg);
			break;
		case 'c':
			if (parse_cpus(optarg, cpus))
				return usage_error("CPU list '%s': use e.g. 0-1,3 (below %d)", optarg,
					    DPP_MAX_CPUS);
			break;
		default:
			return 2;
		}
	}
	if (!iface)
		return usage_error("attach needs -i IFACE");
	rc = iface_index(iface, &ifindex);
	if (!rc)
		rc = open_instance(c);
	if (rc)
		return rc;
	rc = attach_to(c, iface, ifindex, mode, cpus);
	/* Do not leave behind an instance that this command created for nothing. */
	if (rc && !dpp_reused(c->d))
		dpp_unpin(c->d);
	return rc;
}

int cmd_detach(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "interface", required_argument, NULL, 'i' },
		{},
	};
	const char *iface = NULL;
	int opt, ifindex, rc, err;

	while ((opt = getopt_long(argc, argv, "i:", opts, NULL)) != -1) {
		if (opt != 'i')
			return 2;
		iface = optarg;
	}
	if (!iface)
		return usage_error("detach needs -i IFACE");
	rc = iface_index(iface, &ifindex);
	if (!rc)
		rc = open_existing(c);
	if (rc)
		return rc;
	err = dpp_detach(c->d, ifindex);
	if (err == -ENOENT)
		return fail(0, "instance '%s' is not attached to %s", c->instance, iface);
	if (err)
		return fail(err, "detach instance '%s' from %s", c->instance, iface);
	printf("instance '%s' detached from %s\n", c->instance, iface);
	return 0;
}

int cmd_unload(struct ctl *c, int argc, char **argv)
{
	int rc, err;

	(void)argv;
	if (argc > 1)
		return usage_error("unload takes no arguments");
	rc = open_existing(c);
	if (rc)
		return rc;
	err = dpp_unpin(c->d);
	if (err)
		return fail(err, "unpin instance '%s'", c->instance);
	printf("instance '%s' unloaded\n", c->instance);
	return 0;
}

static __u32 program_id(int fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) ? 0 : info.id;
}

/* Replace the pinned program with the one this build carries, under traffic: the links switch
 * over in one step, and rules, counters and configuration stay (they live in the pinned maps). */
int cmd_upgrade(struct ctl *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "no-flow-cache", no_argument, NULL, 'F' },
		{},
	};
	LIBBPF_OPTS(dpp_upgrade_opts, uopts, .flow_cache = true);
	__u32 before;
	int opt, rc, err;

	while ((opt = getopt_long(argc, argv, "F", opts, NULL)) != -1) {
		if (opt != 'F')
			return 2;
		uopts.flow_cache = false;
	}
	rc = open_existing(c);
	if (rc)
		return rc;
	before = program_id(dpp_prog_fd(c->d));
	err = dpp_upgrade(c->d, &uopts);
	if (err)
		return fail(err, "upgrade instance '%s' (the previous program still runs)", c->instance);
	printf("instance '%s' upgraded: program id %u -> %u\n", c->instance, before,
	       program_id(dpp_prog_fd(c->d)));
	return 0;
}
