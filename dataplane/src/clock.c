// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The policers' clock timer (bpf/nf/qos/clock.h): started by running its program once, at each
 * load, reopen and upgrade, so that the COARSE policers read the time with a load; its word read
 * for a status (dppctl status). */
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

/* The program that starts the timer, or hands it to this load's callback (bpf/nf/qos/clock.h). */
#define CLOCK_START_PROG "dpp_clock_start"
/* The clock word's map, as the kernel names a load's section .data.clock, and how many maps the
 * starter uses at most (the timer's and the word's). */
#define CLOCK_WORD_MAP ".data.clock"
#define CLOCK_START_MAPS_MAX 4

static int clock_prog_fd(const struct dpp *d)
{
	int i;

	for (i = 0; i < d->progs.nr; i++) {
		if (!strcmp(d->progs.progs[i].name, CLOCK_START_PROG))
			return d->progs.progs[i].fd;
	}
	return -1;
}

/* What a failed run leaves: a load's or an upgrade's timer not started; a reopen's, which asked to
 * keep a running timer, any such timer running as it was. */
static void clock_warn(bool keep, const char *why)
{
	if (keep)
		pr_warn("start the policers' clock timer, if stopped, at reopen: %s: a timer still "
			"running keeps their word, a stopped one leaves them the helper", why);
	else
		pr_warn("start the policers' clock timer: %s: they call the helper", why);
}

/* Never fails the instance: a timer that does not run leaves the policers on the helper (the
 * clock's word is then never the jiffies'), which is slower, not wrong. Warns why. `keep`: a
 * running timer is left to its callback (a reopen's: bpf/nf/qos/clock.h's head, "Who starts it"),
 * else it is made this load's. */
void clock_start(struct dpp *d, bool keep)
{
	/* XDP runs on a frame; the program reads its first byte only */
	unsigned char frame[64] = { keep ? DPP_CLOCK_START_KEEP : 0 };
	LIBBPF_OPTS(bpf_test_run_opts, topts, .data_in = frame, .data_size_in = sizeof(frame),
		    .repeat = 1);
	int fd = clock_prog_fd(d), err;

	if (fd < 0) /* an instance pinned by a build without it: its policers call the helper */
		return;
	err = bpf_prog_test_run_opts(fd, &topts);
	if (err)
		clock_warn(keep, strerror(-err));
	else if (keep && topts.retval == DPP_CLOCK_START_RESTARTED)
		d->clock_restarted = true;
	else if (topts.retval != XDP_PASS)
		clock_warn(keep, CLOCK_START_PROG " aborted");
}

bool dpp_clock_restarted(const struct dpp *d)
{
	return d->clock_restarted;
}

/* An fd of the clock word of the load program `prog_fd` belongs to (its own map .data.clock), or
 * -ENOENT. */
static int clock_word_fd(int prog_fd)
{
	__u32 ids[CLOCK_START_MAPS_MAX], len = sizeof(struct bpf_prog_info), i;
	struct bpf_prog_info info = { .nr_map_ids = CLOCK_START_MAPS_MAX,
				      .map_ids = (__u64)(unsigned long)ids };
	int err = bpf_obj_get_info_by_fd(prog_fd, &info, &len), fd;

	if (err)
		return err;
	for (i = 0; i < info.nr_map_ids && i < CLOCK_START_MAPS_MAX; i++) {
		struct bpf_map_info map = {};
		__u32 map_len = sizeof(map);

		fd = bpf_map_get_fd_by_id(ids[i]);
		if (fd < 0)
			return -errno;
		err = bpf_obj_get_info_by_fd(fd, &map, &map_len);
		if (!err && !strcmp(map.name, CLOCK_WORD_MAP))
			return fd;
		close(fd);
	}
	return -ENOENT;
}

int dpp_clock_word_get(const struct dpp *d, struct dpp_clock_word *word)
{
	__u32 zero = 0;
	int prog_fd = clock_prog_fd(d), fd, err;

	if (prog_fd < 0)
		return -ENOENT;
	fd = clock_word_fd(prog_fd);
	if (fd < 0)
		return fd;
	err = bpf_map_lookup_elem(fd, &zero, word) ? -errno : 0;
	close(fd);
	return err;
}
