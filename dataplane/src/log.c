// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* libdpp's messages: to the callback set with dpp_set_log(), libbpf's with them; never printed. */
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

static dpp_log_fn log_fn;
static void *log_ctx;
static bool log_hooked;

static void log_emit(enum dpp_log_level level, const char *fmt, va_list ap)
{
	char small[512], *msg = small, *big = NULL;
	va_list again;
	size_t len;
	int n;

	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	/* libbpf dumps whole verifier logs in one message: do not cut them at the stack buffer. */
	if (n >= (int)sizeof(small)) {
		big = malloc((size_t)n + 1);
		if (big) {
			vsnprintf(big, (size_t)n + 1, fmt, again);
			msg = big;
		}
	}
	va_end(again);
	if (n < 0)
		return;
	len = strlen(msg);
	while (len && msg[len - 1] == '\n')
		msg[--len] = '\0';
	log_fn(level, msg, log_ctx);
	free(big);
}

__attribute__((format(printf, 2, 3)))
void libdpp_log(enum dpp_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	log_emit(level, fmt, ap);
	va_end(ap);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum dpp_log_level l = DPP_LOG_DEBUG;

	if (!log_fn)
		return 0;
	if (level == LIBBPF_WARN)
		l = DPP_LOG_WARN;
	else if (level == LIBBPF_INFO)
		l = DPP_LOG_INFO;
	log_emit(l, fmt, ap);
	return 0;
}

/* libbpf prints to stderr until told otherwise; libdpp must not print at all. */
void log_hook_libbpf(void)
{
	if (log_hooked)
		return;
	libbpf_set_print(libbpf_print);
	log_hooked = true;
}

void dpp_set_log(dpp_log_fn fn, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
	log_hook_libbpf();
}

/* Interface name for messages; falls back to the index (e.g. in another network namespace). */
const char *ifname_of(int ifindex, char buf[IF_NAMESIZE + 16])
{
	char name[IF_NAMESIZE];

	if (if_indextoname((unsigned int)ifindex, name))
		snprintf(buf, IF_NAMESIZE + 16, "%s", name);
	else
		snprintf(buf, IF_NAMESIZE + 16, "ifindex %d", ifindex);
	return buf;
}
