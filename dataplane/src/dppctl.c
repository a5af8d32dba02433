// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dppctl: operator CLI over libdpp. Attaches and detaches an instance, shows its state, rules and
 * counters, and unloads it. Results go to stdout; a failure is one line on stderr. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dpp/libdpp.h"
#include "dpp_names.h"

#define DPPCTL_MAX_IFS 64
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

struct ctl {
	const char *instance;
	struct dpp *d;
};

struct cmd {
	const char *name;
	int (*run)(struct ctl *c, int argc, char **argv);
	const char *usage;
	const char *help; /* what it does, then a line per option */
};

#ifndef DPP_VERSION
#define DPP_VERSION "unknown" /* the Makefile passes the project's version */
#endif

static bool verbose;
/* libdpp explains failures through its log; the last warning completes our one error line. */
static char last_warning[256];

static void log_cb(enum dpp_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (verbose) {
		fprintf(stderr, "dppctl: %s\n", msg);
		return;
	}
	if (level == DPP_LOG_WARN)
		snprintf(last_warning, sizeof(last_warning), "%.*s", (int)strcspn(msg, "\n"), msg);
}

#define EXIT_FAILED 1 /* an operation failed */
#define EXIT_USAGE 2  /* the command line is wrong */

/* "dppctl: <what>: <why>" for a bad command line; returns the exit code. */
__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dppctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_USAGE;
}

/* "dppctl: <what>: <why>[ (<libdpp's explanation>)]"; returns the exit code. */
__attribute__((format(printf, 2, 3)))
static int fail(int err, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "dppctl: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s", strerror(err < 0 ? -err : err));
	if (last_warning[0])
		fprintf(stderr, " (%s)", last_warning);
	fputc('\n', stderr);
	return EXIT_FAILED;
}

static const char *ifname_of(int ifindex, char buf[IF_NAMESIZE])
{
	if (!if_indextoname((unsigned int)ifindex, buf))
		snprintf(buf, IF_NAMESIZE, "?");
	return buf;
}

/* ---- opening ---- */

static int open_instance(struct ctl *c)
{
	struct dpp_open_opts o = {
		.sz = DPP_OPEN_OPTS_SZ,
		.instance = c->instance,
		.flow_cache = true,
		.default_verdict = DPP_VERDICT_PASS,
	};
	int err;

	err = dpp_open(&o, &c->d);
	if (err)
		return fail(err, "open instance '%s'", c->instance);
	return 0;
}

/* Commands other than attach must not load a new instance as a side effect. */
static int open_existing(struct ctl *c)
{
	char path[PATH_MAX];

	if (!strchr(c->instance, '/') && strcmp(c->instance, ".") && strcmp(c->instance, "..")) {
		snprintf(path, sizeof(path), "%s/%s/prog", DPP_PIN_ROOT, c->instance);
		if (access(path, F_OK))
			return fail(0, "no instance '%s' (nothing pinned at %s)", c->instance,
				    path);
	}
	return open_instance(c);
}

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

static int cmd_attach(struct ctl *c, int argc, char **argv)
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

static int cmd_detach(struct ctl *c, int argc, char **argv)
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

static int cmd_unload(struct ctl *c, int argc, char **argv)
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
static int cmd_upgrade(struct ctl *c, int argc, char **argv)
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

/* ---- status ---- */

static int count_rule(const struct dpp_flow_key *key, const struct dpp_rule *rule, void *ctx)
{
	(void)key;
	(void)rule;
	(*(unsigned long *)ctx)++;
	return 0;
}

static int print_program(struct ctl *c)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int err;

	err = bpf_obj_get_info_by_fd(dpp_prog_fd(c->d), &info, &len);
	if (err)
		return fail(err, "read program info");
	printf("program    id %u, %s\n", info.id, info.name);
	return 0;
}

static int print_attached(struct ctl *c)
{
	int ifs[DPPCTL_MAX_IFS], n, i;
	char name[IF_NAMESIZE];

	n = dpp_attached(c->d, ifs, DPPCTL_MAX_IFS);
	if (n < 0)
		return fail(n, "list attached interfaces");
	if (!n)
		printf("attached   none\n");
	for (i = 0; i < n && i < DPPCTL_MAX_IFS; i++)
		printf("%s %s (ifindex %d)\n", i ? "          " : "attached  ",
		       ifname_of(ifs[i], name), ifs[i]);
	return 0;
}

static int print_rule_fill(struct ctl *c)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	unsigned long count = 0;
	int err;

	err = bpf_obj_get_info_by_fd(dpp_map_fd(c->d, "dpp_rules"), &info, &len);
	if (err)
		return fail(err, "read dpp_rules info");
	err = dpp_rules_foreach(c->d, count_rule, &count);
	if (err)
		return fail(err, "count rules");
	printf("rules      %lu of %u (dpp_rules)\n", count, info.max_entries);
	return 0;
}

static void print_group(const char *label, __u32 group)
{
	if (group == DPP_NONE)
		printf("%s none", label);
	else
		printf("%s %u", label, group);
}

static int print_config(struct ctl *c)
{
	struct dpp_shape_set set;
	struct dpp_config cfg;
	int err;

	err = dpp_config_get(c->d, &cfg);
	if (!err)
		err = dpp_shapes_get(c->d, &set);
	if (err)
		return fail(err, "read config");
	printf("shapes     %u in set %u\n", set.count, cfg.shape_set);
	printf("config     generation %u, default verdict %s,", cfg.generation,
	       DPP_NAME(dpp_verdict_names, cfg.default_verdict));
	print_group(" default alt group", cfg.default_alt_group);
	printf(", meter window %llu ns\n", (unsigned long long)cfg.meter_window_ns);
	return 0;
}

static void print_cpu(__u32 cpu, const struct dpp_cpu *cpu_state, bool first)
{
	printf("%s %u: ", first ? "cpus      " : "          ", cpu);
	if (cpu_state->capacity_pps)
		printf("%llu pps (%llu per window)",
		       (unsigned long long)cpu_state->capacity_pps,
		       (unsigned long long)cpu_state->window_budget);
	else
		printf("unmetered");
	printf(", %s\n", cpu_state->overloaded ? "overloaded" : "ok");
}

static int print_cpus(struct ctl *c)
{
	int ncpus = libbpf_num_possible_cpus();
	struct dpp_cpu cpu_state;
	bool first = true;
	__u32 cpu;
	int err;

	if (ncpus < 0)
		return fail(ncpus, "count possible CPUs");
	for (cpu = 0; cpu < (__u32)ncpus && cpu < DPP_MAX_CPUS; cpu++) {
		err = dpp_cpu_get(c->d, cpu, &cpu_state);
		if (err)
			return fail(err, "read CPU %u", cpu);
		if (!cpu_state.enabled)
			continue;
		print_cpu(cpu, &cpu_state, first);
		first = false;
	}
	if (first)
		printf("cpus       none\n");
	return 0;
}

static int cmd_status(struct ctl *c, int argc, char **argv)
{
	int rc;

	(void)argv;
	if (argc > 1)
		return usage_error("status takes no arguments");
	rc = open_existing(c);
	if (rc)
		return rc;
	printf("instance   %s (%s)\n", c->instance, dpp_reused(c->d) ? "reused" : "loaded");
	rc = print_program(c);
	if (!rc)
		rc = print_attached(c);
	if (!rc)
		rc = print_rule_fill(c);
	if (!rc)
		rc = print_config(c);
	if (!rc)
		rc = print_cpus(c);
	return rc;
}

/* ---- rules ---- */

struct rules_ctx {
	struct dpp_shape_set shapes;
	struct dpp_counter *stats; /* indexed by slot */
	__u32 nr_stats;
	unsigned long count;
};

static unsigned int mask_prefix(const __u32 *mask, unsigned int bytes)
{
	const unsigned char *b = (const unsigned char *)mask;
	unsigned int i, len = 0;

	for (i = 0; i < bytes; i++)
		len += (unsigned int)__builtin_popcount(b[i]);
	return len;
}

static void print_addr(const char *label, const __u32 *addr, const __u32 *mask, __u8 family)
{
	char buf[INET6_ADDRSTRLEN];
	int af = family == 6 ? AF_INET6 : AF_INET;
	unsigned int bytes = family == 6 ? 16 : 4;

	if (!addr[0] && !addr[1] && !addr[2] && !addr[3])
		return;
	inet_ntop(af, addr, buf, sizeof(buf));
	printf(" %s=%s", label, buf);
	if (mask)
		printf("/%u", mask_prefix(mask, bytes));
}

static void print_key_flags(__u8 flags)
{
	const char *sep = "=";
	unsigned int bit;

	if (!flags)
		return;
	printf(" flags");
	for (bit = 0; bit < 8; bit++) {
		if (!(flags & (1u << bit)))
			continue;
		printf("%s%s", sep, DPP_NAME(dpp_key_flag_names, bit));
		sep = "|";
	}
}

static const char *proto_name(__u8 proto, char buf[8])
{
	switch (proto) {
	case 1:
		return "icmp";
	case 6:
		return "tcp";
	case 17:
		return "udp";
	case 58:
		return "icmpv6";
	}
	snprintf(buf, 8, "%u", proto);
	return buf;
}

/* Non-zero key fields; prefix lengths from the rule's shape when that shape is published. */
static void print_key(const struct dpp_flow_key *k, const struct dpp_shape_set *shapes)
{
	const struct dpp_flow_key *mask = NULL;
	char name[IF_NAMESIZE], proto[8];

	for (__u32 i = 0; i < shapes->count && i < DPP_MAX_SHAPES; i++)
		if (shapes->shapes[i].mask.shape == k->shape) /* a shape's mask carries its id */
			mask = &shapes->shapes[i].mask;
	if (k->ifindex)
		printf(" ifindex=%u(%s)", k->ifindex, ifname_of((int)k->ifindex, name));
	if (k->vlan)
		printf(" vlan=%u", k->vlan);
	if (k->overlay)
		printf(" overlay=%s", DPP_NAME(dpp_overlay_names, k->overlay));
	if (k->vni)
		printf(" vni=%u", k->vni);
	if (k->teid)
		printf(" teid=0x%08x", k->teid);
	if (k->qfi)
		printf(" qfi=%u", k->qfi);
	print_key_flags(k->flags);
	if (k->family)
		printf(" family=ipv%u", k->family);
	if (k->proto)
		printf(" proto=%s", proto_name(k->proto, proto));
	if (k->dscp)
		printf(" dscp=%u", k->dscp);
	if (k->sport)
		printf(" sport=%u", k->sport);
	if (k->dport)
		printf(" dport=%u", k->dport);
	print_addr("src", k->src, mask ? mask->src : NULL, k->family);
	print_addr("dst", k->dst, mask ? mask->dst : NULL, k->family);
}

/* DPP_NONE as a rule's group means the configured default group. */
static void print_rule_group(const char *label, __u32 group)
{
	if (group == DPP_NONE)
		printf("%s default group", label);
	else
		printf("%s group %u", label, group);
}

static void print_action(const struct dpp_rule *r)
{
	char name[IF_NAMESIZE];

	printf(" -> %s", DPP_NAME(dpp_action_names, r->action));
	switch (r->action) {
	case DPP_ACTION_STEER:
		printf(" cpu %u", r->target);
		break;
	case DPP_ACTION_FORWARD:
		print_rule_group(" to", r->alt_group);
		break;
	case DPP_ACTION_REDIRECT:
		printf(" %s (ifindex %u)", ifname_of((int)r->target, name), r->target);
		break;
	}
	if (r->flags & DPP_RULE_BEST_EFFORT)
		printf(", best-effort");
	if (r->action == DPP_ACTION_STEER || (r->flags & DPP_RULE_BEST_EFFORT))
		print_rule_group(", overflow to", r->alt_group);
}

static int print_rule(const struct dpp_flow_key *key, const struct dpp_rule *rule, void *ctx)
{
	struct rules_ctx *rc = ctx;

	printf("slot %u prio %u shape %u:", rule->slot, rule->priority, key->shape);
	print_key(key, &rc->shapes);
	print_action(rule);
	if (rule->slot < rc->nr_stats)
		printf("; %llu pkts %llu bytes", (unsigned long long)rc->stats[rule->slot].packets,
		       (unsigned long long)rc->stats[rule->slot].bytes);
	putchar('\n');
	rc->count++;
	return 0;
}

static int rules_ctx_fill(struct ctl *c, struct rules_ctx *rc)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	int err, ncpus;

	err = dpp_shapes_get(c->d, &rc->shapes);
	if (err)
		return fail(err, "read shapes");
	err = bpf_obj_get_info_by_fd(dpp_map_fd(c->d, "dpp_rule_stats"), &info, &len);
	if (err)
		return fail(err, "read dpp_rule_stats info");
	ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0)
		return fail(ncpus ?: -EINVAL, "count possible CPUs");
	/* One row of rule slots per possible CPU (dpp_maps.h). */
	rc->nr_stats = info.max_entries / ncpus;
	rc->stats = calloc(rc->nr_stats ?: 1, sizeof(*rc->stats));
	if (!rc->stats)
		return fail(-ENOMEM, "allocate rule counters");
	err = dpp_stats_rules(c->d, 0, rc->nr_stats, rc->stats);
	if (err)
		return fail(err, "read rule counters");
	return 0;
}

static int cmd_rules(struct ctl *c, int argc, char **argv)
{
	struct rules_ctx rc = {};
	int err, ret;

	(void)argv;
	if (argc > 1)
		return usage_error("rules takes no arguments");
	ret = open_existing(c);
	if (!ret)
		ret = rules_ctx_fill(c, &rc);
	if (!ret) {
		err = dpp_rules_foreach(c->d, print_rule, &rc);
		if (err)
			ret = fail(err, "list rules");
	}
	if (!ret && !rc.count)
		printf("no rules\n");
	free(rc.stats);
	return ret;
}

/* ---- stats ---- */

static void print_counters(const char *title, const char *const *names, unsigned int nr_names,
			   const struct dpp_counter *cnt, unsigned int n)
{
	unsigned int i;

	printf("%-18s %16s %20s\n", title, "packets", "bytes");
	for (i = 0; i < n; i++)
		printf("  %-16s %16llu %20llu\n", i < nr_names && names[i] ? names[i] : "?",
		       (unsigned long long)cnt[i].packets, (unsigned long long)cnt[i].bytes);
}

/* Only CPUs that were steered to: most of DPP_MAX_CPUS never are. */
static void print_cpu_counters(const struct dpp_counter *cnt, unsigned int n)
{
	bool titled = false;
	unsigned int i;

	for (i = 0; i < n; i++) {
		if (!cnt[i].packets && !cnt[i].bytes)
			continue;
		if (!titled) {
			printf("%-18s %16s %20s\n", "steered to cpu", "packets", "bytes");
			titled = true;
		}
		printf("  %-16u %16llu %20llu\n", i, (unsigned long long)cnt[i].packets,
		       (unsigned long long)cnt[i].bytes);
	}
}

static int cmd_stats(struct ctl *c, int argc, char **argv)
{
	struct dpp_counter verdicts[DPP_VERDICT_MAX], actions[DPP_ACTION_MAX];
	struct dpp_counter reasons[DPP_REASON_MAX], cpus[DPP_MAX_CPUS];
	int rc, err;

	(void)argv;
	if (argc > 1)
		return usage_error("stats takes no arguments");
	rc = open_existing(c);
	if (rc)
		return rc;
	err = dpp_stats_verdicts(c->d, verdicts);
	if (!err)
		err = dpp_stats_actions(c->d, actions);
	if (!err)
		err = dpp_stats_reasons(c->d, reasons);
	if (!err)
		err = dpp_stats_cpus(c->d, cpus, DPP_MAX_CPUS);
	if (err)
		return fail(err, "read counters");
	print_counters("verdict", dpp_verdict_names, ARRAY_SIZE(dpp_verdict_names), verdicts,
		       DPP_VERDICT_MAX);
	print_counters("action", dpp_action_names, ARRAY_SIZE(dpp_action_names), actions,
		       DPP_ACTION_MAX);
	print_counters("reason", dpp_reason_names, ARRAY_SIZE(dpp_reason_names), reasons,
		       DPP_REASON_MAX);
	print_cpu_counters(cpus, DPP_MAX_CPUS);
	return 0;
}

/* ---- main ---- */

static const struct cmd cmds[] = {
	{ "attach", cmd_attach, "attach -i IFACE [-m native|generic|offload] [-c CPUS]",
	  "Attach the instance to IFACE, loading and pinning it first if nothing is pinned yet.\n"
	  "  -i, --interface IFACE  the interface whose received packets the program sees\n"
	  "  -m, --mode MODE        native (the default), generic or offload\n"
	  "  -c, --cpus CPUS        add these CPUs (e.g. 0-1,3) to the set flows are steered to\n" },
	{ "detach", cmd_detach, "detach -i IFACE",
	  "Detach the instance from IFACE; its pins, rules and counters stay.\n"
	  "  -i, --interface IFACE  the interface to detach from\n" },
	{ "status", cmd_status, "status",
	  "Show the instance: its program, maps, shapes, configuration and CPU set.\n" },
	{ "rules", cmd_rules, "rules", "List the installed rules, their keys, actions and counters.\n" },
	{ "stats", cmd_stats, "stats",
	  "Show the packet counters per verdict, action, parse reason and CPU.\n" },
	{ "upgrade", cmd_upgrade, "upgrade [--no-flow-cache]",
	  "Replace the pinned program with this build's, under traffic: rules, counters and\n"
	  "configuration stay, and the previous program runs on if any step fails.\n"
	  "  --no-flow-cache        load the new program without the per-flow cache\n" },
	{ "unload", cmd_unload, "unload",
	  "Remove every pin of the instance, which detaches it from its interfaces.\n" },
};

static void usage(FILE *f)
{
	unsigned int i;

	fprintf(f, "usage: dppctl [-n INSTANCE] [-v] COMMAND [ARGS]\n");
	for (i = 0; i < ARRAY_SIZE(cmds); i++)
		fprintf(f, "       dppctl [-n INSTANCE] %s\n", cmds[i].usage);
	fprintf(f, "       dppctl --version\n");
	fprintf(f, "INSTANCE defaults to \"default\"; CPUS is a list such as 0-1,3.\n"
		   "`dppctl COMMAND --help` says what a command does.\n");
}

static void cmd_usage(const struct cmd *cmd)
{
	printf("usage: dppctl [-n INSTANCE] %s\n%s", cmd->usage, cmd->help);
}

/* Whether the command's arguments ask for its help (before any "--"). */
static bool wants_help(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

static const struct cmd *cmd_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cmds); i++) {
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "instance", required_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	struct ctl c = { .instance = "default" };
	const struct cmd *cmd;
	int opt, rc;

	/* "+": stop at the command, whose own options are parsed by the command. */
	while ((opt = getopt_long(argc, argv, "+n:vhV", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			c.instance = optarg;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("dppctl %s (libbpf %s)\n", DPP_VERSION, libbpf_version_string());
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	cmd = cmd_find(argv[optind]);
	if (!cmd) {
		fprintf(stderr, "dppctl: unknown command '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	argc -= optind;
	argv += optind;
	if (wants_help(argc, argv)) {
		cmd_usage(cmd);
		return 0;
	}
	dpp_set_log(log_cb, NULL);
	optind = 0; /* glibc: restart scanning on the command's own arguments */
	rc = cmd->run(&c, argc, argv);
	/* A warning on success still matters (e.g. pins that will not outlive this process). */
	if (!rc && last_warning[0])
		fprintf(stderr, "dppctl: warning: %s\n", last_warning);
	dpp_close(c.d);
	return rc;
}
