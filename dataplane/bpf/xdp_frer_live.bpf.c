// SPDX-License-Identifier: GPL-2.0-only
/* The replicate benchmark's programs besides the talker (bench/frer/replicate.py), run in live-frame
 * mode:
 *
 *   xdp_frer_broadcast  the frame broadcast to the ports of frer_live_tx, without a program on them:
 *                       what any XDP replication to those ports pays, FRER's work aside
 *   xdp_frer_sink       on the veth peers of the ports: counts the copies that arrive and drops them, and puts the talker's
 * original frame head back in front of the payload of a copy that carries an R-tag.
 *
 * Why: in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES) the kernel writes the test frame into a page
 * once, when its page pool creates the page, and later runs reuse the page as the last run left
 * it. A talker moves the frame's addresses 6 bytes up to push its R-tag, so the page's next run
 * would read the source address as the destination, match no stream and measure something else.
 * The one copy of a broadcast that is not a clone is the original page, dropped here: writing the
 * original head (addresses and EtherType) back where the run found it makes every run start from
 * the original frame. With frer_sink_config.streams above 1, the head written back names the next
 * stream of a walk over that many (the destination address's last 4 bytes its handle, stepping by
 * `stride`, coprime with it), so that consecutive frames are different streams' (cold).
 *
 * Only untagged frames whose R-tag sits right behind the addresses are put back; the others are
 * counted as such (frer_sink_stats.other): the broadcast's copies, and any a talker got wrong. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "dpp/nf/frer.h"

#define HEAD_LEN (2 * ETH_ALEN + 2)

/* 0 -> what the sink writes back: the original head, and the walk over streams */
struct frer_sink_config {
	__u8 head[HEAD_LEN]; /* destination, source, EtherType of the talker's frame */
	__u16 reserved;
	__u32 streams;	/* the walk's length; 0 or 1: the head as given */
	__u32 stride;
};

/* 0 -> counts of what arrived, shared by the peers and the CPUs */
struct frer_sink_stats {
	__u64 copies;	 /* frames received */
	__u64 rewound;	 /* frames whose original head was written back */
	__u64 other;	 /* frames with an R-tag elsewhere, or none: left as they are */
	__u64 position; /* the walk's step */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct frer_sink_config);
} frer_sink_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct frer_sink_stats);
} frer_sink_stats SEC(".maps");

/* The walk's next stream handle, in network order, for the destination's last 4 bytes. */
static __always_inline __be32 next_stream(const struct frer_sink_config *cfg, struct frer_sink_stats *stats)
{
	__u64 step = __sync_fetch_and_add(&stats->position, 1);

	return bpf_htonl(1 + (__u32)(step * cfg->stride % cfg->streams));
}

SEC("xdp")
int xdp_frer_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct frer_sink_config *cfg;
	struct frer_sink_stats *stats;
	__u32 zero = 0;
	__u8 *orig;

	cfg = bpf_map_lookup_elem(&frer_sink_config, &zero);
	stats = bpf_map_lookup_elem(&frer_sink_stats, &zero);
	if (!cfg || !stats)
		return XDP_DROP;
	__sync_fetch_and_add(&stats->copies, 1);
	orig = data + DPP_FRER_RTAG_LEN; /* where the talker's run found the frame */
	if ((void *)(orig + HEAD_LEN) > end ||
	    *(__be16 *)(data + 2 * ETH_ALEN) != bpf_htons(DPP_FRER_RTAG_ETHERTYPE)) {
		__sync_fetch_and_add(&stats->other, 1);
		return XDP_DROP;
	}
	__builtin_memcpy(orig, cfg->head, HEAD_LEN);
	if (cfg->streams > 1)
		*(__be32 *)(orig + 2) = next_stream(cfg, stats);
	__sync_fetch_and_add(&stats->rewound, 1);
	return XDP_DROP;
}

/* ifindex -> a port xdp_frer_broadcast sends to, without an egress program (a hash, as a group of
 * dpp_frer_tx) */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, DPP_MAX_FRER_PORTS);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} frer_live_tx SEC(".maps");

SEC("xdp")
int xdp_frer_broadcast(struct xdp_md *ctx __attribute__((unused)))
{
	return bpf_redirect_map(&frer_live_tx, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
}

char LICENSE[] SEC("license") = "GPL";
