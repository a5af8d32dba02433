// SPDX-License-Identifier: GPL-2.0-only
/* Sequence recovery (nf/frer/recover.h) alone, for tests and benchmarks: every frame is an Ethernet
 * frame, R-tagged or not (after its VLAN tags), whose payload is a test header naming its
 * stream handle and its time:
 *
 *   Ethernet [/ 802.1Q] [/ R-tag] / EtherType 0x88B5 / struct frer_test_hdr
 *
 * A time of 0 is the kernel's clock; any other the test's own, so that a test replays a sequence
 * against the reference model (netapp/frer/model.py). With `auto_seq` set, the sequence number is
 * this CPU's count of such frames instead of the tag's (a run of repeated frames is then a stream
 * in order: the race test's and the benchmark's). xdp_frer returns XDP_PASS or XDP_DROP as the
 * function decides (the R-tag popped when its flags say so), XDP_ABORTED for a frame it cannot
 * read, and writes the decision (enum dpp_frer_decision) into the test header, which the test reads
 * from the output frame; xdp_frer_skip reads the same headers and passes: the path without the
 * recovery, which the benchmark subtracts. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "nf/frer/rtag.h"
#include "nf/frer/recover.h"

struct frer_test_hdr {
	__be32 stream;
	__u8 auto_seq;
	__u8 decision; /* written by xdp_frer */
	__u16 reserved;
	__u64 now_ns; /* 0: bpf_ktime_get_ns() */
};

/* Never read: puts FRER's ABI enums in this object's BTF, where tests/frer/test_abi.py checks the
 * Python mirror against them. */
const volatile struct {
	enum dpp_frer_algo algo;
	enum dpp_frer_flags flags;
	enum dpp_frer_decision decision;
} frer_abi_enums;

/* this CPU's count of auto_seq frames: their sequence numbers */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} frer_test_seq SEC(".maps");

static __always_inline struct frer_test_hdr *test_hdr(struct xdp_md *ctx, const struct frer_frame *f)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct frer_test_hdr *hdr = data + (f->payload & 0xff);

	return (void *)(hdr + 1) > end ? NULL : hdr;
}

static __always_inline __u16 auto_seq(void)
{
	__u32 zero = 0, *count = bpf_map_lookup_elem(&frer_test_seq, &zero);

	return count ? (__u16)(*count)++ : 0;
}

SEC("xdp")
int xdp_frer(struct xdp_md *ctx)
{
	struct dpp_frer_recovery *r;
	struct frer_frame f = {};
	struct frer_test_hdr *hdr;
	struct cursor c;
	__u32 stream;
	__u64 now;
	int decision;

	if (!frer_parse(ctx, &f, &c) || !(hdr = test_hdr(ctx, &f)))
		return XDP_ABORTED;
	stream = bpf_ntohl(hdr->stream);
	now = hdr->now_ns ? hdr->now_ns : bpf_ktime_get_ns();
	if (hdr->auto_seq)
		f.seq = auto_seq();
	r = frer_recovery(stream);
	decision = frer_recover(r, stream, f.tagged, f.seq, now);
	hdr->decision = decision;
	if (!frer_passes(decision))
		return XDP_DROP;
	if (r && (r->flags & DPP_FRER_POP) && frer_pop(ctx, &f))
		return XDP_ABORTED;
	return XDP_PASS;
}

SEC("xdp")
int xdp_frer_skip(struct xdp_md *ctx)
{
	struct frer_frame f = {};
	struct frer_test_hdr *hdr;
	struct cursor c;

	if (!frer_parse(ctx, &f, &c) || !(hdr = test_hdr(ctx, &f)))
		return XDP_ABORTED;
	return hdr->stream ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
