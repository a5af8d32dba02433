// SPDX-License-Identifier: GPL-2.0-only
/* The FRER testbed's fast talker and listener (bench/frer/fast.py), so that neither a Python
 * socket's send nor its capture bounds the rate the testbed is driven at:
 *
 *   xdp_frer_send   run in live-frame mode (BPF_F_TEST_XDP_LIVE_FRAMES) as if received on the
 *                   talker's port: frame k becomes a frame of stream k mod traffic_config.streams
 *                   (that stream's head written over the frame), carries the stream's handle and its
 *                   next number in its payload, and is transmitted (XDP_TX) towards the replicating
 *                   node
 *   xdp_frer_check  on the listener's port: checks that each stream's numbers arrive exactly once
 *                   (a bit per number) and in order (the next number expected), counts, records the
 *                   latency, and drops the frame
 *
 * The payload is the Python talker's (bench/frer/testbed.py PAYLOAD): the stream's handle (32 bits),
 * the frame's number (64 bits) and its send time (64 bits), big-endian; the time here is
 * bpf_ktime_get_ns (CLOCK_MONOTONIC: the listener reads the same clock).
 *
 * In live-frame mode the kernel writes the test frame into a page once and later runs reuse the page
 * as the last run left it (the replicating node pushes its R-tag into that page): the talker writes
 * every byte it means to send up to the end of the payload, so what a previous run left there does not
 * matter.
 *
 * Concurrency: xdp_frer_send runs in the one task of a test run, never on two CPUs at once; the
 * numbers are still taken with an atomic add, so that two runs at once would not share one.
 * xdp_frer_check runs in the NAPI poll of the listener port's single receive queue, which one CPU at
 * a time runs: its state is read and written without atomics. */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef TRAFFIC_MAX_STREAMS
#define TRAFFIC_MAX_STREAMS 16 /* stream handles 0..15 */
#endif
/* The numbers of a stream the listener can tell apart (a bit each): a run sends fewer per stream. */
#ifndef TRAFFIC_WINDOW
#define TRAFFIC_WINDOW (1 << 22)
#endif
#define TRAFFIC_WINDOW_WORDS (TRAFFIC_WINDOW / 64)
/* Ethernet, IPv4 without options, UDP: what the talker writes in front of the payload. */
#define TRAFFIC_HEAD_LEN (ETH_HLEN + sizeof(struct iphdr) + sizeof(struct udphdr))
/* The latency histogram: 1 µs buckets, the last one for everything above. */
#define TRAFFIC_LATENCY_BUCKETS 8192

struct traffic_payload {
	__be32 stream;
	__be64 number;
	__be64 sent_ns;
} __attribute__((packed));

/* A stream the talker sends: its frames' head, up to the payload (IPv4 checksum included: every
 * frame of the run has the same length). */
struct traffic_stream {
	__u8 head[TRAFFIC_HEAD_LEN];
	__u16 reserved;
	__u32 handle;
};

/* What the talker does with frame k. */
struct traffic_config {
	__u32 streams;	/* entries of traffic_streams in use, 1..TRAFFIC_MAX_STREAMS */
	__u32 reserved;
	__u64 position; /* frames sent so far, over every run: frame k is stream k mod streams */
};

/* What the listener saw of one stream. */
struct traffic_check {
	__u64 received;	  /* frames of the stream */
	__u64 next;	  /* the number expected next: one above the highest received */
	__u64 in_order;	  /* frames numbered `next` when they came */
	__u64 duplicates; /* frames whose number had come before */
	__u64 late;	  /* frames below `next`, not duplicates: overtaken by a later number */
	__u64 skipped;	  /* numbers jumped over when a frame came above `next` (later filled or lost) */
	__u64 beyond;	  /* frames numbered at or above TRAFFIC_WINDOW: not checked */
	__u64 ahead;	  /* frames above `next` when they came (together they jumped the `skipped` numbers) */
};

/* 0 -> the talker's walk over the streams */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct traffic_config);
} traffic_config SEC(".maps");

/* slot (frame k's is k mod streams) -> the stream's head and handle */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRAFFIC_MAX_STREAMS);
	__type(key, __u32);
	__type(value, struct traffic_stream);
} traffic_streams SEC(".maps");

/* stream handle -> the number its next frame gets (the frames the talker sent of it) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRAFFIC_MAX_STREAMS);
	__type(key, __u32);
	__type(value, __u64);
} traffic_sent SEC(".maps");

/* stream handle -> what the listener saw of it */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRAFFIC_MAX_STREAMS);
	__type(key, __u32);
	__type(value, struct traffic_check);
} traffic_checks SEC(".maps");

/* handle * TRAFFIC_WINDOW_WORDS + number / 64 -> the numbers of that word received (a bit each) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRAFFIC_MAX_STREAMS * TRAFFIC_WINDOW_WORDS);
	__type(key, __u32);
	__type(value, __u64);
} traffic_seen SEC(".maps");

/* µs of latency (send to check; the last bucket: that many or more) -> frames */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TRAFFIC_LATENCY_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} traffic_latency SEC(".maps");

/* 0 -> frames the listener passed to the kernel: not a stream's (ARP, IPv6 neighbour discovery, ...) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} traffic_other SEC(".maps");

SEC("xdp")
int xdp_frer_send(struct xdp_md *ctx)
{
	struct traffic_payload payload;
	struct traffic_config *cfg;
	struct traffic_stream *s;
	__u32 zero = 0, slot;
	__u64 *next;

	cfg = bpf_map_lookup_elem(&traffic_config, &zero);
	if (!cfg || !cfg->streams)
		return XDP_ABORTED;
	slot = __sync_fetch_and_add(&cfg->position, 1) % cfg->streams;
	s = bpf_map_lookup_elem(&traffic_streams, &slot);
	if (!s)
		return XDP_ABORTED;
	next = bpf_map_lookup_elem(&traffic_sent, &s->handle);
	if (!next)
		return XDP_ABORTED;
	payload.stream = bpf_htonl(s->handle);
	payload.number = bpf_cpu_to_be64(__sync_fetch_and_add(next, 1));
	payload.sent_ns = bpf_cpu_to_be64(bpf_ktime_get_ns());
	if (bpf_xdp_store_bytes(ctx, 0, s->head, TRAFFIC_HEAD_LEN) ||
	    bpf_xdp_store_bytes(ctx, TRAFFIC_HEAD_LEN, &payload, sizeof(payload)))
		return XDP_ABORTED; /* a frame too short for the payload: the run's error */
	return XDP_TX;
}

/* The stream payload of a UDP frame over IPv4 (untagged or with one VLAN tag: a copy of a path that
 * tags), NULL for any other frame. */
static __always_inline struct traffic_payload *payload_of(void *data, void *end)
{
	struct ethhdr *eth = data;
	struct iphdr *ip;
	__u16 proto;
	void *l3;

	if ((void *)(eth + 1) > end)
		return NULL;
	proto = eth->h_proto;
	l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if (l3 + 4 > end)
			return NULL;
		proto = *(__be16 *)(l3 + 2);
		l3 += 4;
	}
	ip = l3;
	if (proto != bpf_htons(ETH_P_IP) || (void *)(ip + 1) > end || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return NULL;
	if ((void *)(ip + 1) + sizeof(struct udphdr) + sizeof(struct traffic_payload) > end)
		return NULL;
	return (void *)(ip + 1) + sizeof(struct udphdr);
}

/* Marks `number` of the stream received; true when it had been before. */
static __always_inline bool seen_before(__u32 handle, __u64 number)
{
	__u32 key = handle * TRAFFIC_WINDOW_WORDS + (__u32)(number / 64);
	__u64 bit = 1ULL << (number % 64), *word = bpf_map_lookup_elem(&traffic_seen, &key);
	bool seen;

	if (!word)
		return false;
	seen = *word & bit;
	*word |= bit;
	return seen;
}

static __always_inline void count_order(struct traffic_check *c, __u64 number)
{
	if (number == c->next) {
		c->in_order++;
		c->next = number + 1;
	} else if (number > c->next) {
		c->ahead++;
		c->skipped += number - c->next;
		c->next = number + 1;
	} else {
		c->late++;
	}
}

static __always_inline void count_latency(__u64 sent_ns)
{
	__u64 *frames, us = (bpf_ktime_get_ns() - sent_ns) / 1000;
	__u32 bucket = us < TRAFFIC_LATENCY_BUCKETS ? us : TRAFFIC_LATENCY_BUCKETS - 1;

	frames = bpf_map_lookup_elem(&traffic_latency, &bucket);
	if (frames)
		*frames += 1;
}

SEC("xdp")
int xdp_frer_check(struct xdp_md *ctx)
{
	struct traffic_payload *p = payload_of((void *)(long)ctx->data, (void *)(long)ctx->data_end);
	struct traffic_check *c = NULL;
	__u32 handle = 0, zero = 0;
	__u64 number, *other;

	if (p) {
		handle = bpf_ntohl(p->stream);
		c = bpf_map_lookup_elem(&traffic_checks, &handle);
	}
	if (!c) {
		other = bpf_map_lookup_elem(&traffic_other, &zero);
		if (other)
			*other += 1;
		return XDP_PASS;
	}
	number = bpf_be64_to_cpu(p->number);
	c->received++;
	count_latency(bpf_be64_to_cpu(p->sent_ns));
	if (number >= TRAFFIC_WINDOW) {
		c->beyond++;
		return XDP_DROP;
	}
	if (seen_before(handle, number)) {
		c->duplicates++;
		return XDP_DROP;
	}
	count_order(c, number);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
