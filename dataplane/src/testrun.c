// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* One packet through the loaded program (BPF_PROG_TEST_RUN), with the trace it leaves. */
#include <errno.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

const struct dpp_map_spec testrun_maps[] = {
	DPP_ARRAY_SPEC(DPP_MAP_TRACE, "dpp_trace", BPF_MAP_TYPE_ARRAY, struct dpp_trace),
	{},
};

int dpp_test_run(struct dpp *d, const void *pkt, __u32 len, __u32 ingress_ifindex, void *out,
		 __u32 *out_len, struct dpp_test_result *res)
{
	struct xdp_md ctx = { .data_end = len, .ingress_ifindex = ingress_ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, topts, .data_in = pkt, .data_size_in = len, .repeat = 1);
	struct dpp_trace trace = {};
	int err;

	if (!d || !pkt || !len || (out && !out_len))
		return -EINVAL;
	if (out) {
		topts.data_out = out;
		topts.data_size_out = *out_len;
	}
	if (ingress_ifindex) {
		topts.ctx_in = &ctx;
		topts.ctx_size_in = sizeof(ctx);
	}
	/* A program loaded without trace never writes the slot: zeroing it keeps results clean. */
	err = update_u32(d, DPP_MAP_TRACE, 0, &trace);
	if (err)
		return err;
	err = bpf_prog_test_run_opts(entry_fd(d), &topts);
	if (out_len)
		*out_len = topts.data_size_out;
	if (err) {
		pr_warn("test run: %s", strerror(-err));
		return err;
	}
	if (!res)
		return 0;
	err = lookup_u32(d, DPP_MAP_TRACE, 0, &trace);
	if (err)
		return err;
	res->verdict = topts.retval;
	res->duration_ns = topts.duration;
	res->trace = trace;
	return 0;
}
