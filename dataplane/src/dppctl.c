// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dppctl: operator CLI over libdpp. Attaches and detaches an instance, shows its state, rules and
 * counters, and unloads it. Results go to stdout; a failure is one line on stderr. Here: main and
 * the command table; dppctl.h lists the files of the commands. */
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>

#include "dppctl.h"

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

/* "dppctl: <what>: <why>" for a bad command line; returns the exit code. */
__attribute__((format(printf, 1, 2)))
int usage_error(const char *fmt, ...)
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
int fail(int err, const char *fmt, ...)
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

/* ---- opening ---- */

int open_instance(struct ctl *c)
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
int open_existing(struct ctl *c)
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

