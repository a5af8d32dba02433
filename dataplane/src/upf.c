// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The user plane function's calls: the frames its data path hands to user space (the ring
 * dpp_upf_punt, bpf/nf/upf/punt.h) read and handed to a callback, and a frame sent back through the
 * program as if it had just arrived (BPF_PROG_TEST_RUN with live frames: replayed buffered ones). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

#define DPP_UPF_PUNT_HDR offsetof(struct dpp_upf_punt, frame)

/* The ring is read only here: declared, so that it is checked at open and never written as a table. */
const struct dpp_map_spec upf_maps[] = {
	{ .id = DPP_MAP_UPF_PUNT, .name = "dpp_upf_punt", .type = BPF_MAP_TYPE_RINGBUF },
	{},
};

struct dpp_upf_punts {
	struct ring_buffer *rb;
	dpp_upf_punt_cb cb;
	void *ctx;
	__u64 malformed; /* records shorter than they say: never handed over */
};

static int punt_sample(void *ctx, void *data, size_t size)
{
	struct dpp_upf_punts *p = ctx;
	const struct dpp_upf_punt *rec = data;

	if (size < DPP_UPF_PUNT_HDR || rec->len > DPP_UPF_PUNT_FRAME_MAX ||
	    DPP_UPF_PUNT_HDR + rec->len > size) {
		p->malformed++;
		return 0;
	}
	return p->cb(rec, p->ctx);
}

int dpp_upf_punts_open(struct dpp *d, dpp_upf_punt_cb cb, void *ctx, struct dpp_upf_punts **out)
{
	struct dpp_upf_punts *p;
	int err;

	if (!d || !cb || !out)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->cb = cb;
	p->ctx = ctx;
	p->rb = ring_buffer__new(map_fd(d, DPP_MAP_UPF_PUNT), punt_sample, p, NULL);
	if (!p->rb) {
		err = -errno;
		pr_warn("upf punts: reading dpp_upf_punt: %s", strerror(-err));
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

int dpp_upf_punts_poll(struct dpp_upf_punts *p, int timeout_ms)
{
	int n;

	if (!p)
		return -EINVAL;
	n = ring_buffer__poll(p->rb, timeout_ms);
	return n == -EINTR ? 0 : n;
}

int dpp_upf_punts_fd(const struct dpp_upf_punts *p)
{
	if (!p)
		return -EINVAL;
	return ring_buffer__epoll_fd(p->rb);
}

int dpp_upf_punts_malformed(const struct dpp_upf_punts *p, __u64 *out)
{
	if (!p || !out)
		return -EINVAL;
	*out = p->malformed;
	return 0;
}

void dpp_upf_punts_close(struct dpp_upf_punts *p)
{
	if (!p)
		return;
	ring_buffer__free(p->rb);
	free(p);
}

int dpp_upf_replay(struct dpp *d, const void *frame, __u32 len, __u32 ifindex)
{
	struct xdp_md ctx = { .data_end = len, .ingress_ifindex = ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = frame, .data_size_in = len, .ctx_in = &ctx,
		    .ctx_size_in = sizeof(ctx), .repeat = 1, .flags = BPF_F_TEST_XDP_LIVE_FRAMES);
	int err;

	if (!d || !frame || !len || !ifindex)
		return -EINVAL;
	err = bpf_prog_test_run_opts(entry_fd(d), &opts);
	if (err)
		pr_warn("upf replay on ifindex %u: %s", ifindex, strerror(-err));
	return err;
}

/* dpp_upf_dl4's placement: the decisions of netapp/upf/ways.py `Ways.plan` over arrays (that
 * Python is the reference, and tests/upf/test_ways_place.py runs both). */

int dpp_upf_dl4_buckets(const __u32 *instances, const __u8 *families, const void *addrs, __u32 n,
			__u32 bits, __s32 *buckets)
{
	const __u8 *addr = addrs;
	__u32 i, host;
	__u64 h;

	if (bits > 30 || (n && (!instances || !families || !addrs || !buckets)))
		return -EINVAL;
	for (i = 0; i < n; i++, addr += 16) {
		if (!bits || families[i] != 4 || instances[i] >= 1u << bits) {
			buckets[i] = DPP_UPF_DL4_HASHED;
			continue;
		}
		host = (__u32)addr[0] << 24 | (__u32)addr[1] << 16 | (__u32)addr[2] << 8 | addr[3];
		h = (__u32)(host * DPP_UPF_DL4_HASH_MUL);
		buckets[i] = (__s32)((__u32)((h << bits) >> 32) ^ instances[i]);
	}
	return 0;
}

/* The first clean way of the bucket, or -1; *retired: whether one of its ways is retired. */
static __s64 dl4_clean_way(const __u8 *state, __u32 bucket, bool *retired)
{
	__u32 slot = bucket * DPP_UPF_DL4_WAYS, way;

	*retired = false;
	for (way = 0; way < DPP_UPF_DL4_WAYS; way++) {
		if (!state[slot + way])
			return slot + way;
		*retired |= state[slot + way] & DPP_UPF_DL4_RETIRED;
	}
	return -1;
}

static void dl4_untake(__u8 *state, const __s32 *ways, __u32 n)
{
	__u32 i;

	for (i = 0; i < n; i++)
		if (ways[i] >= 0)
			state[ways[i]] &= ~DPP_UPF_DL4_TAKEN;
}

int dpp_upf_dl4_place(const __s32 *buckets, __u32 n, __u8 *state, __u32 slots, __u32 from,
		      int may_wait, __s32 *ways)
{
	bool retired;
	__s64 way;
	__u32 i;

	if (n && (!buckets || !state || !ways))
		return -EINVAL;
	for (i = 0; i < n; i++)
		if (buckets[i] >= 0 && (__u64)buckets[i] * DPP_UPF_DL4_WAYS + DPP_UPF_DL4_WAYS > slots)
			return -ERANGE;
	for (i = from; i < n; i++) {
		if (buckets[i] < 0) {
			ways[i] = buckets[i];
			continue;
		}
		way = dl4_clean_way(state, buckets[i], &retired);
		if (way < 0 && retired && may_wait)
			return i;
		ways[i] = way < 0 ? DPP_UPF_DL4_HASHED : (__s32)way;
		if (way >= 0)
			state[way] |= DPP_UPF_DL4_TAKEN;
	}
	dl4_untake(state, ways, n);
	return n;
}
