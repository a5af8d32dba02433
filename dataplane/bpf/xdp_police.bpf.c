// SPDX-License-Identifier: GPL-2.0-only
/* The policers (nf/qos/police.h) alone, for tests and benchmarks: every frame is policed by the
 * policer its test header names, at the time it names, for its whole length.
 *
 *   Ethernet (14 bytes, any type) / struct police_test_hdr
 *
 * A time of 0 is the kernel's clock, the one the first policer asks for (police.h's police_clock,
 * as the pipeline reads it); any other is the test's own, for every policer, so that a test
 * replays a sequence of times against the reference model (netapp/qos/model.py); jiffies
 * likewise (0: bpf_jiffies64, the kernel's; any other the test's, read with its time:
 * test_jiffies). xdp_police returns XDP_PASS or XDP_DROP as the policer decides, XDP_ABORTED for a
 * frame too short;
 * xdp_police_rule takes the header's id for a rule's slot and runs that rule's policers
 * (nf/qos/rule.h); xdp_police_skip reads the same header and passes: the path without the
 * policer, which the benchmark (bench/qos) subtracts. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* The frame's jiffies (struct police_test_hdr.jiffies), for police.h's POLICE_JIFFIES: 0, the
 * kernel's (bpf_jiffies64, as the pipeline reads them); any other the test's, read with the time
 * the frame gives (a stamp is made on it: POLICE_GIVEN_JIFFIES), so that a test replays (time,
 * jiffies) pairs against the reference model. Test-only: the pipeline has no such global. */
static __u64 test_jiffies;
#define POLICE_JIFFIES() (test_jiffies ?: bpf_jiffies64())
#define POLICE_GIVEN_JIFFIES(jiffies) test_jiffies

#include "nf/qos/police.h"
#include "nf/qos/rule.h"

#define ETH_LEN 14

struct police_test_hdr {
	__be32 policer; /* the policer id, network order (as bench/harness.py's walk writes it) */
	__u32 jiffies;	/* 0: bpf_jiffies64(); any other: the test's, with now_ns */
	__u64 now_ns;	/* 0: bpf_ktime_get_ns() */
};

static __always_inline struct police_test_hdr *test_hdr(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct police_test_hdr *hdr = data + ETH_LEN;

	return (void *)(hdr + 1) > end ? NULL : hdr;
}

SEC("xdp")
int xdp_police(struct xdp_md *ctx)
{
	struct police_test_hdr *hdr = test_hdr(ctx);
	__u64 bytes = ctx->data_end - ctx->data;

	if (!hdr)
		return XDP_ABORTED;
	test_jiffies = hdr->jiffies;
	return police(bpf_ntohl(hdr->policer), bytes, hdr->now_ns, POLICE_WINDOW_CREDIT) ? XDP_PASS : XDP_DROP;
}

/* A rule's policers (nf/qos/rule.h), as the pipeline runs them for a policed rule: the header's id
 * is the rule's slot in dpp_rule_policers. */
SEC("xdp")
int xdp_police_rule(struct xdp_md *ctx)
{
	struct police_test_hdr *hdr = test_hdr(ctx);
	__u64 bytes = ctx->data_end - ctx->data;

	if (!hdr)
		return XDP_ABORTED;
	test_jiffies = hdr->jiffies;
	return rule_police(bpf_ntohl(hdr->policer), bytes, hdr->now_ns) ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int xdp_police_skip(struct xdp_md *ctx)
{
	struct police_test_hdr *hdr = test_hdr(ctx);

	if (!hdr)
		return XDP_ABORTED;
	return bpf_ntohl(hdr->policer) ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
