// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The oldest kernel the data path loads on, and why: the one place that says so. A load on an
 * older kernel is refused with the reason (dpp_kernel_check), not left to a verifier's log. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "libdpp_internal.h"

/* What the programs of dpp.bpf.o need from the kernel, newest first:
 *   6.1   a verifier that walks the pipeline's entry (dpp_xdp) within its million instructions:
 *         Ubuntu 22.04's 5.19 gives up on it ("BPF program is too large"; 6.1's walks 212,380 to
 *         257,235 of them), 5.18 and 6.0 are untested, so they are refused with 5.19
 *   5.18  bpf_xdp_load_bytes, bpf_xdp_store_bytes: copies to and from a frame (bpf/nf/upf/punt.h,
 *         bpf/nf/atsss/uplink.h, bpf/nf/atsss/loss.h)
 *   5.17  bpf_loop: ATSSS's walk of a DCCP ACK vector (bpf/nf/atsss/loss.h)
 *   5.15  BPF timers: the policers' clock word (bpf/nf/qos/clock.h)
 *   5.13  redirects to every port of a DEVMAP (BPF_F_BROADCAST, BPF_F_EXCLUDE_INGRESS): FRER's
 *         replication, the duplicated frames, ATSSS's redundant copies
 *   5.12  atomic fetch-and-op and compare-and-exchange on map values: the policers, FRER's recovery
 *   5.11  bpf_ktime_get_coarse_ns: the policers' coarse clock
 *   5.9   XDP programs on CPUMAP entries (the RSS workers), XDP links
 *   5.8   BPF ring buffers (the UPF's punted frames), XDP programs on DEVMAP entries
 * Not counted: the benchmarks' traffic generator's live frames (BPF_F_TEST_XDP_LIVE_FRAMES, 5.18).
 * The stack holds on these kernels too: before 6.9 the verifier rounds each frame to 32 bytes, not
 * 16, and every call chain fits 512 bytes so rounded (tests/dataplane/test_stack_depth.py). The
 * kernels tested are 6.18, Debian 12's 6.1 and 6.12 and Ubuntu's 6.2, 6.5, 6.8 (24.04's, the
 * charm's base) and 6.11, booted under qemu (bench/kernels, tests/dataplane/test_old_kernel.py;
 * dataplane/README.md, "Kernels", says what 6.1's verifier refused and how the programs avoid
 * it), and Ubuntu 22.04's
 * 5.15 and 5.19, where this check refuses the load and the upgrade, each with its own reason.
 * Not relied on: 6.3's reading of a global function's pointer argument as possibly
 * uninitialised (before, the stack it points to must be written: Debian 12's 6.1); the entry's rule
 * is zeroed before dpp_search_shapes and dpp_rss_dispatch, which write it.
 *
 * The helpers the built programs call, by the version that brought them (#: the helper's id; a
 * test reads the calls from the objects and wants each here, at the minimum or before):
 *   5.18  #189 bpf_xdp_load_bytes, #190 bpf_xdp_store_bytes
 *   5.17  #181 bpf_loop
 *   5.15  #169 bpf_timer_init, #170 bpf_timer_set_callback, #171 bpf_timer_start
 *   5.11  #160 bpf_ktime_get_coarse_ns
 *   5.8   #131 bpf_ringbuf_reserve, #132 bpf_ringbuf_submit, #133 bpf_ringbuf_discard
 *   5.5   #118 bpf_jiffies64
 *   5.1   #93 bpf_spin_lock, #94 bpf_spin_unlock
 *   4.18  #65 bpf_xdp_adjust_tail, #69 bpf_fib_lookup
 *   4.15  #54 bpf_xdp_adjust_meta
 *   4.14  #51 bpf_redirect_map
 *   4.10  #44 bpf_xdp_adjust_head
 *   4.6   #28 bpf_csum_diff
 *   4.4   #23 bpf_redirect
 *   4.2   #12 bpf_tail_call
 *   4.1   #5 bpf_ktime_get_ns, #7 bpf_get_prandom_u32, #8 bpf_get_smp_processor_id
 *   3.19  #1 bpf_map_lookup_elem, #2 bpf_map_update_elem */
#define KERNEL_MIN_MAJOR 6
#define KERNEL_MIN_MINOR 1

/* Why a kernel is refused: the oldest step it is below, which is what it lacks first. */
static const struct kernel_step {
	unsigned int major, minor;
	const char *lacks;
} kernel_steps[] = {
	{ 5, 18, "no bpf_xdp_load_bytes and bpf_xdp_store_bytes, for the UPF's and ATSSS's copies" },
	{ KERNEL_MIN_MAJOR, KERNEL_MIN_MINOR,
	  "no verifier known to take the pipeline's entry: 5.19's gives up past its million "
	  "instructions, 5.18's and 6.0's are untested" },
};

/* Kernels that take the data path, but not with the flow cache and trace both on: their verifier
 * gives up on the pipeline's entry past its million instructions with the two together. Booted
 * (bench/kernels): Ubuntu 22.04's HWE 6.2 (6.2.0-39) walks dpp_xdp 713,702 instructions with both
 * off, 913,480 with the flow cache, 935,977 with trace, where 6.1 walks 212,380 to 257,235 and 6.5
 * 202,951 to 236,406 (the BPF of 3a2c63e; the boots in CI check the refusal on every build); 6.3
 * and 6.4 are untested (left to their verifier, whose refusal libdpp then explains:
 * kernel_load_refusal_explain). Trace is for replay and tests, which can do without the cache. */
static const struct kernel_series_limit {
	unsigned int major, minor;
	const char *why;
} kernel_cache_trace_limits[] = {
	{ 6, 2,
	  "6.2's verifier walks the pipeline's entry some three times as far as 6.1's and gives up "
	  "past its million instructions with the two together" },
};

static bool release_below(unsigned int major, unsigned int minor, const struct kernel_step *step)
{
	return major < step->major || (major == step->major && minor < step->minor);
}

/* The major and minor version of a release as `uname -r` prints it (NULL: the running kernel's);
 * *name holds the release read. */
static int release_version(const char **release, struct utsname *name, unsigned int *major,
			   unsigned int *minor)
{
	if (!*release) {
		if (uname(name)) {
			int err = -errno;

			pr_warn("read the kernel's release (uname): %s", strerror(-err));
			return err;
		}
		*release = name->release;
	}
	if (sscanf(*release, "%u.%u", major, minor) != 2) {
		pr_warn("kernel release '%s' names no version", *release);
		return -EINVAL;
	}
	return 0;
}

int dpp_kernel_check(const char *release)
{
	unsigned int major, minor;
	struct utsname name;
	int err;

	err = release_version(&release, &name, &major, &minor);
	if (err)
		return err;
	for (size_t i = 0; i < sizeof(kernel_steps) / sizeof(kernel_steps[0]); i++) {
		const struct kernel_step *step = &kernel_steps[i];

		if (!release_below(major, minor, step))
			continue;
		pr_warn("kernel %s is older than %u.%u, the oldest the data path loads on "
			"(before %u.%u: %s)",
			release, KERNEL_MIN_MAJOR, KERNEL_MIN_MINOR, step->major, step->minor, step->lacks);
		return -EOPNOTSUPP;
	}
	return 0;
}

int dpp_kernel_check_settings(const char *release, bool flow_cache, bool trace)
{
	unsigned int major, minor;
	struct utsname name;
	int err;

	err = dpp_kernel_check(release);
	if (err || !flow_cache || !trace)
		return err;
	err = release_version(&release, &name, &major, &minor);
	if (err)
		return err;
	for (size_t i = 0; i < sizeof(kernel_cache_trace_limits) / sizeof(kernel_cache_trace_limits[0]);
	     i++) {
		const struct kernel_series_limit *limit = &kernel_cache_trace_limits[i];

		if (major != limit->major || minor != limit->minor)
			continue;
		pr_warn("kernel %s takes the data path with the flow cache or with trace, not with both: "
			"%s; open it with either off", release, limit->why);
		return -EOPNOTSUPP;
	}
	return 0;
}

void kernel_load_refusal_explain(int err, bool flow_cache, bool trace)
{
	if (err != -E2BIG)
		return;
	pr_warn("the kernel's verifier gave up on a program of the data path past its million "
		"instructions (the log above names it), with the flow cache %s and trace %s: the kernels "
		"and settings known to take it are listed in dataplane/README.md, \"Kernels\"",
		flow_cache ? "on" : "off", trace ? "on" : "off");
}
