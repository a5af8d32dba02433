/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* dppctl internal: what its commands share. dppctl.c: main, the command table, error lines and
 * opening the instance; dppctl_load.c: attach, detach, upgrade, unload; dppctl_show.c: status,
 * rules, stats. A command is `int cmd_<name>(struct ctl *, argc, argv)` returning the exit code. */
#ifndef DPPCTL_H
#define DPPCTL_H

#include "dpp/libdpp.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define EXIT_FAILED 1 /* an operation failed */
#define EXIT_USAGE 2  /* the command line is wrong */

struct ctl {
	const char *instance;
	struct dpp *d;
};

__attribute__((format(printf, 1, 2)))
int usage_error(const char *fmt, ...);
__attribute__((format(printf, 2, 3)))
int fail(int err, const char *fmt, ...);
int open_instance(struct ctl *c);
int open_existing(struct ctl *c);

int cmd_attach(struct ctl *c, int argc, char **argv);
int cmd_detach(struct ctl *c, int argc, char **argv);
int cmd_upgrade(struct ctl *c, int argc, char **argv);
int cmd_unload(struct ctl *c, int argc, char **argv);
int cmd_status(struct ctl *c, int argc, char **argv);
int cmd_rules(struct ctl *c, int argc, char **argv);
int cmd_stats(struct ctl *c, int argc, char **argv);

#endif /* DPPCTL_H */
