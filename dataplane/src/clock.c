// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The policers' clock timer (bpf/nf/qos/clock.h): started by running its program once, at each
 * load, reopen and upgrade, so that the COARSE policers read the time with a load. */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

/* The program that starts the timer, or hands it to this load's callback (bpf/nf/qos/clock.h). */
#define CLOCK_START_PROG "dpp_clock_start"
/* XDP's verdict of a started timer. */
#define CLOCK_STARTED 2

static int clock_prog_fd(const struct dpp *d)
{
	int i;

	for (i = 0; i < d->progs.nr; i++) {
		if (!strcmp(d->progs.progs[i].name, CLOCK_START_PROG))
			return d->progs.progs[i].fd;
	}
	return -1;
}

/* Never fails the instance: a timer that does not run leaves the policers on the helper (the
 * clock's word is then never the jiffies'), which is slower, not wrong. Warns why. */
void clock_start(const struct dpp *d)
{
	unsigned char frame[64] = {}; /* XDP runs on a frame; the program reads none of it */
	LIBBPF_OPTS(bpf_test_run_opts, topts, .data_in = frame, .data_size_in = sizeof(frame),
		    .repeat = 1);
	int fd = clock_prog_fd(d), err;

	if (fd < 0) /* an instance pinned by a build without it: its policers call the helper */
		return;
	err = bpf_prog_test_run_opts(fd, &topts);
	if (err)
		pr_warn("start the policers' clock: %s: they call the helper", strerror(-err));
	else if (topts.retval != CLOCK_STARTED)
		pr_warn("the policers' clock timer did not start: they call the helper");
}
