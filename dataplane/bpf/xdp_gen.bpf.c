// SPDX-License-Identifier: GPL-2.0-only
/* The paced multi-flow generator of dpp-pktgen: run in BPF_PROG_TEST_RUN live-frame mode, it turns
 * frame k into flow k mod nflows (its header template written over the frame), holds the frame
 * until its slot of the schedule (start + k / rate), counts it per flow and transmits it (XDP_TX).
 * The kernel sends a batch's frames together when the batch ends, so the traffic arrives in bursts
 * of the run's batch size at the paced average rate.
 *
 * A frame that finds itself more than slack_ns behind its slot (the CPU was busy elsewhere) does
 * not start a catch-up burst: the schedule slips by its delay instead, so the offered traffic is
 * never burstier than the batch size plus slack_ns worth of frames, and the rate achieved (frames
 * over the time from first to last) shows how much time was lost. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#ifndef GEN_MAX_FLOWS
#define GEN_MAX_FLOWS 256
#endif
/* The frames of one run differ only in their first GEN_TEMPLATE_MAX bytes (dpp-pktgen checks). */
#define GEN_TEMPLATE_MAX 256
/* Checksums a spread number may be covered by: the IPv4 header's and the UDP or TCP one. */
#define GEN_CSUMS_MAX 2
/* bpf_loop's own limit; at some 20 ns per clock read a wait can last about 150 ms, longer than
 * the gap between any two frames of a run that is worth measuring. */
#define GEN_WAIT_MAX_LOOPS (1 << 23)

struct gen_template {
	__u8 bytes[GEN_TEMPLATE_MAX];
};

/* flow -> the first tmpl_len bytes of its frame */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GEN_MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct gen_template);
} gen_templates SEC(".maps");

/* flow -> frames handed to XDP_TX (one CPU runs the test: no per-CPU slots needed) */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, GEN_MAX_FLOWS);
	__type(key, __u32);
	__type(value, __u64);
} gen_sent SEC(".maps");

/* Load-time knobs (skeleton rodata). */
const volatile __u32 tmpl_len = 0;  /* bytes written from the template; 0: frames as they are */
const volatile __u32 nflows = 1;    /* templates in use, at most GEN_MAX_FLOWS */
const volatile __u64 period_ps = 0; /* gap between two slots; 0: no pacing, as fast as possible */
const volatile __u64 slack_ns = 0;  /* how far behind its slot a frame may be and still catch up */
const volatile __u32 spread = 1;    /* flows per template: frame k adds (k / nflows) % spread ... */
const volatile __u32 spread_off = 0; /* ... to the 16-bit big-endian number at this offset */
const volatile __u32 ncsums = 0;    /* checksums covering that number, updated with it */
const volatile __u32 csum_off[GEN_CSUMS_MAX] = {}; /* where each sits */

/* Run state, read by dpp-pktgen when the run is over. */
__u64 gen_seq = 0;	   /* frames so far */
__u64 gen_start_ns = 0;	   /* slot 0: the clock when the first frame arrived */
__u64 gen_last_ns = 0;	   /* when the last frame was released */
__u64 gen_slips = 0;	   /* frames that found themselves more than slack_ns behind */
__u64 gen_slipped_ns = 0;  /* the schedule's total delay from those slips */
__u64 gen_max_late_ns = 0; /* the largest delay behind the schedule */

static long wait_until(__u64 index __attribute__((unused)), void *due)
{
	return bpf_ktime_get_ns() >= *(__u64 *)due;
}

/* Holds the frame until its slot; returns when it was released. */
static __always_inline __u64 pace(__u64 seq, __u64 now)
{
	__u64 due, late;

	if (!seq)
		gen_start_ns = now;
	if (!period_ps)
		return now;
	due = gen_start_ns + gen_slipped_ns + seq * period_ps / 1000;
	if (now < due) {
		bpf_loop(GEN_WAIT_MAX_LOOPS, wait_until, &due, 0);
		return bpf_ktime_get_ns();
	}
	late = now - due;
	if (late > gen_max_late_ns)
		gen_max_late_ns = late;
	if (late > slack_ns) {
		gen_slips++;
		gen_slipped_ns += late;
	}
	return now;
}

static __always_inline int apply_template(struct xdp_md *ctx, __u32 flow)
{
	struct gen_template *t;
	__u32 len = tmpl_len;

	if (!len)
		return 0;
	if (len > GEN_TEMPLATE_MAX)
		len = GEN_TEMPLATE_MAX;
	t = bpf_map_lookup_elem(&gen_templates, &flow);
	if (!t)
		return -1;
	return bpf_xdp_store_bytes(ctx, 0, t->bytes, len);
}

/* m' for m in a checksum: RFC 1624's HC' = ~(~HC + ~m + m'), all three as they lie in the frame
 * (a one's complement sum is the same in either byte order). A number at an odd distance from its
 * checksum lies across the sum's 16-bit words: its bytes count swapped. */
static __always_inline __u16 csum_replace(__u16 csum, __u16 old, __u16 new, int swapped)
{
	__u32 sum;

	if (swapped) {
		old = (__u16)(old << 8 | old >> 8);
		new = (__u16)(new << 8 | new >> 8);
	}
	sum = (__u16)~csum + (__u16)~old + new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Keeps the checksums at csum_off right for the number changed from old to new. A checksum of 0
 * stays 0 (UDP's "none"); one that comes out 0 is written 0xffff, UDP's way of sending it and the
 * same one's complement number for the others. */
static __always_inline int fix_csums(struct xdp_md *ctx, __u16 old, __u16 new)
{
	__u16 csum;

	for (__u32 i = 0; i < GEN_CSUMS_MAX && i < ncsums; i++) {
		if (bpf_xdp_load_bytes(ctx, csum_off[i], &csum, sizeof(csum)))
			return -1;
		if (!csum)
			continue;
		csum = csum_replace(csum, old, new, (csum_off[i] ^ spread_off) & 1);
		if (!csum)
			csum = 0xffff;
		if (bpf_xdp_store_bytes(ctx, csum_off[i], &csum, sizeof(csum)))
			return -1;
	}
	return 0;
}

/* Frame seq as the (seq / nflows) % spread-th flow of its template: many flows per template, so
 * that the receiver's flow caches are not always warm. */
static __always_inline int apply_spread(struct xdp_md *ctx, __u64 seq)
{
	__u16 old, number;

	if (spread <= 1)
		return 0;
	if (bpf_xdp_load_bytes(ctx, spread_off, &old, sizeof(old)))
		return -1;
	number = bpf_htons(bpf_ntohs(old) + (__u16)(seq / nflows % spread));
	if (number == old)
		return 0;
	if (bpf_xdp_store_bytes(ctx, spread_off, &number, sizeof(number)))
		return -1;
	return fix_csums(ctx, old, number);
}

SEC("xdp")
int xdp_gen(struct xdp_md *ctx)
{
	__u64 seq = gen_seq;
	__u32 flow = nflows > 1 ? seq % nflows : 0;
	__u64 *sent;

	if (apply_template(ctx, flow) || apply_spread(ctx, seq))
		return XDP_ABORTED;
	gen_last_ns = pace(seq, bpf_ktime_get_ns());
	gen_seq = seq + 1;
	sent = bpf_map_lookup_elem(&gen_sent, &flow);
	if (sent)
		*sent += 1;
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
