// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dppctl's commands that show an instance: status, rules and stats. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dppctl.h"
#include "dpp_names.h"

#define DPPCTL_MAX_IFS 64
#define DPPCTL_MAX_PROGS 16

static const char *ifname_of(int ifindex, char buf[IF_NAMESIZE])
{
	if (!if_indextoname((unsigned int)ifindex, buf))
		snprintf(buf, IF_NAMESIZE, "?");
	return buf;
}

/* ---- status ---- */

static int count_rule(const struct dpp_flow_key *key, const struct dpp_rule *rule, void *ctx)
{
	(void)key;
	(void)rule;
	(*(unsigned long *)ctx)++;
	return 0;
}

/* Every program of the instance, the XDP entry first. */
static int print_programs(struct ctl *c)
{
	struct dpp_prog_desc progs[DPPCTL_MAX_PROGS];
	int n, i;

	n = dpp_programs(c->d, progs, DPPCTL_MAX_PROGS);
	if (n < 0)
		return fail(n, "list programs");
	for (i = 0; i < n && i < DPPCTL_MAX_PROGS; i++) {
		printf("%s id %u, %s", i ? "          " : "program   ", progs[i].id, progs[i].name);
		if (progs[i].kind == DPP_PROG_KIND_XDP)
			printf(" (XDP entry)\n");
		else if (progs[i].kind == DPP_PROG_KIND_CPUMAP)
			printf(" (CPUMAP queues' program)\n");
		else if (progs[i].kind == DPP_PROG_KIND_DEVMAP)
			printf(" (DEVMAP ports' program)\n");
		else if (progs[i].slot >= 0)
			printf(" (tail call, slot %s)\n", DPP_NAME(dpp_prog_names, progs[i].slot));
		else
			printf(" (in no slot)\n");
	}
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

static __u64 clock_ns(clockid_t id, bool resolution)
{
	struct timespec t = {};

	if (resolution)
		clock_getres(id, &t);
	else
		clock_gettime(id, &t);
	return (__u64)t.tv_sec * 1000000000ull + (__u64)t.tv_nsec;
}

/* The COARSE policers' clock (bpf/nf/qos/clock.h): how old its word is (the time its timer last
 * read, CLOCK_MONOTONIC), or that they read the helper: a word two ticks old has jiffies the
 * kernel moved past (the timer writes one every DPP_CLOCK_PERIOD_NS while it runs). A timer this
 * command's open found stopped it has started again (a reopen does): said so, as it was found. */
static int print_clock(struct ctl *c)
{
	struct dpp_clock_word word;
	__u64 now, tick;
	int err;

	if (dpp_clock_restarted(c->d)) {
		printf("clock      stopped: coarse policers read the helper; "
		       "this command started it again\n");
		return 0;
	}
	err = dpp_clock_word_get(c->d, &word);
	if (err == -ENOENT) {
		printf("clock      none: coarse policers read the helper\n");
		return 0;
	}
	if (err)
		return fail(err, "read the policers' clock word");
	now = clock_ns(CLOCK_MONOTONIC, false);
	tick = clock_ns(CLOCK_MONOTONIC_COARSE, true);
	if (!word.jiffies || now - word.ns >= 2 * tick)
		printf("clock      stopped: coarse policers read the helper\n");
	else
		printf("clock      word %llu us old\n", (unsigned long long)(now - word.ns) / 1000);
	return 0;
}

int cmd_status(struct ctl *c, int argc, char **argv)
{
	int rc;

	(void)argv;
	if (argc > 1)
		return usage_error("status takes no arguments");
	rc = open_existing(c);
	if (rc)
		return rc;
	printf("instance   %s (%s)\n", c->instance, dpp_reused(c->d) ? "reused" : "loaded");
	rc = print_programs(c);
	if (!rc)
		rc = print_attached(c);
	if (!rc)
		rc = print_rule_fill(c);
	if (!rc)
		rc = print_config(c);
	if (!rc)
		rc = print_cpus(c);
	if (!rc)
		rc = print_clock(c);
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
		printf(" cpu %u", r->arg);
		break;
	case DPP_ACTION_FORWARD:
		print_rule_group(" to", r->arg);
		break;
	case DPP_ACTION_REDIRECT:
		printf(" %s (ifindex %u)", ifname_of((int)r->arg, name), r->arg);
		break;
	}
	if (r->flags & DPP_RULE_BEST_EFFORT)
		printf(", best-effort");
	if (r->action == DPP_ACTION_STEER || (r->flags & DPP_RULE_BEST_EFFORT))
		print_rule_group(", overflow to", r->overflow_group);
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
	/* One row of rule slots per possible CPU (bpf/core/maps.h). */
	rc->nr_stats = info.max_entries / ncpus;
	rc->stats = calloc(rc->nr_stats ?: 1, sizeof(*rc->stats));
	if (!rc->stats)
		return fail(-ENOMEM, "allocate rule counters");
	err = dpp_stats_rules(c->d, 0, rc->nr_stats, rc->stats);
	if (err)
		return fail(err, "read rule counters");
	return 0;
}

int cmd_rules(struct ctl *c, int argc, char **argv)
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
	for (i = 0; i < n; i++) {
		/* A slot with no name (between reason ranges) shows only if it counted something. */
		if ((i >= nr_names || !names[i]) && !cnt[i].packets && !cnt[i].bytes)
			continue;
		printf("  %-16s %16llu %20llu\n", i < nr_names && names[i] ? names[i] : "?",
		       (unsigned long long)cnt[i].packets, (unsigned long long)cnt[i].bytes);
	}
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

int cmd_stats(struct ctl *c, int argc, char **argv)
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
