// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dpp-pktgen: a traffic generator for veth testbeds. Sends the frames of a pcap file out of an
 * interface at kernel speed with BPF_PROG_TEST_RUN in live-frame mode (an XDP_TX program run on
 * the frames as if they had arrived there; the frames leave towards the interface's peer).
 *
 * Two modes. By default every frame of the file is one test run of its own, repeated. With -m
 * (mixed), one run carries all of them interleaved: frame k of the run becomes frame k mod N of
 * the file (xdp_gen.bpf.c writes its headers over the frame), optionally paced at -p frames per
 * second, and the frames sent per file frame (per flow) are reported. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "xdp_tx.skel.h"
#include "xdp_gen.skel.h"

#define PCAP_MAGIC_US 0xa1b2c3d4u
#define PCAP_MAGIC_NS 0xa1b23c4du
#define MAX_FRAME 4096
#define MAX_FRAMES 4096
/* Mixed mode: what xdp_gen.bpf.c can hold (GEN_MAX_FLOWS, GEN_TEMPLATE_MAX). */
#define MIX_MAX_FRAMES 256
#define MIX_TEMPLATE_MAX 256
#define MIX_CSUMS_MAX 2	/* GEN_CSUMS_MAX */
/* How far behind its slot a paced frame may be and still catch up (more: the schedule slips). */
#define DEFAULT_SLACK_US 100

struct frame {
	uint32_t len;
	uint8_t data[MAX_FRAME];
};

struct pcap_file_hdr {
	uint32_t magic;
	uint16_t major, minor;
	int32_t zone;
	uint32_t sigfigs, snaplen, linktype;
};

struct pcap_rec_hdr {
	uint32_t sec, frac, incl_len, orig_len;
};

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s -i IFACE -r PCAP [-n FRAMES_PER_PACKET] [-R ROUNDS] [-b BATCH]\n"
		"           [-c CPU]\n"
		"       %s -i IFACE -r PCAP -m -n FRAMES [-p PPS] [-b BATCH] [-c CPU]\n"
		"           [-L SLACK_US] [-s SPREAD -S OFFSET [-C CSUM_OFFSET]...]\n"
		"Sends every frame of PCAP (Ethernet, little-endian pcap) FRAMES_PER_PACKET times out of\n"
		"IFACE, interleaved over ROUNDS rounds. Prints frames sent and the rate achieved.\n"
		"Each frame of each round is one live-frame test run, and every run costs the kernel\n"
		"tens of milliseconds of set-up: keep ROUNDS small (default 1) and FRAMES large.\n"
		"-m (mixed): one run of FRAMES frames, frame k being frame k mod N of PCAP;\n"
		"the N frames must have one length and may differ only in their first %d\n"
		"bytes (at most %d frames). -p PPS paces a mixed run: frame k leaves no\n"
		"earlier than k/PPS s after the first; a frame more than SLACK_US (default\n"
		"%d) behind its slot makes the schedule slip instead of bursting to catch up.\n"
		"-b: frames per batch of the run (default 64), sent together when the batch\n"
		"ends. -c: run on this CPU. A mixed run prints one JSON object with the\n"
		"frames sent per PCAP frame. -s SPREAD (mixed) makes each PCAP frame SPREAD flows:\n"
		"frame k adds (k / N) mod SPREAD to the 16-bit big-endian number at byte OFFSET\n"
		"(-S), e.g. the UE's UDP source port. -C (up to %d times, with -s): a 16-bit\n"
		"Internet checksum at byte CSUM_OFFSET that covers that number (the IPv4\n"
		"header's, the UDP or TCP one), updated with it; a checksum of 0 stays 0.\n",
		prog, prog, MIX_TEMPLATE_MAX, MIX_MAX_FRAMES, DEFAULT_SLACK_US, MIX_CSUMS_MAX);
}

struct options {
	const char *ifname, *pcap;
	__u32 per_packet, rounds, batch;
	int cpu;	  /* -1: wherever the scheduler puts us */
	bool mixed;
	double pps;	  /* mixed: 0 = unpaced */
	__u64 slack_us;	  /* mixed: how far behind a frame may catch up */
	__u32 spread;	  /* mixed: flows per PCAP frame (1: none) */
	long spread_off;  /* mixed: where the 16-bit number spread is added to sits */
	__u32 ncsums;	  /* mixed: checksums covering that number (-C) */
	long csum_off[MIX_CSUMS_MAX];
};

/* Reads up to MAX_FRAMES Ethernet frames; returns the count or -errno. */
static int read_pcap(const char *path, struct frame *frames)
{
	struct pcap_file_hdr fh;
	struct pcap_rec_hdr rh;
	int n = 0, err = 0;
	FILE *f = fopen(path, "rb");

	if (!f)
		return -errno;
	if (fread(&fh, sizeof(fh), 1, f) != 1 ||
	    (fh.magic != PCAP_MAGIC_US && fh.magic != PCAP_MAGIC_NS) || fh.linktype != 1) {
		err = -EPROTO;
		goto cleanup;
	}
	while (n < MAX_FRAMES && fread(&rh, sizeof(rh), 1, f) == 1) {
		if (rh.incl_len > MAX_FRAME || fread(frames[n].data, 1, rh.incl_len, f) != rh.incl_len) {
			err = -EPROTO;
			goto cleanup;
		}
		frames[n++].len = rh.incl_len;
	}
cleanup:
	fclose(f);
	return err ? err : n;
}

static int send_frame(int prog_fd, int ifindex, struct frame *fr, __u32 count, __u32 batch)
{
	struct xdp_md ctx = { .data_end = fr->len, .ingress_ifindex = ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = fr->data, .data_size_in = fr->len,
		    .ctx_in = &ctx, .ctx_size_in = sizeof(ctx), .repeat = count,
		    .flags = BPF_F_TEST_XDP_LIVE_FRAMES, .batch_size = batch);

	return bpf_prog_test_run_opts(prog_fd, &opts);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Bytes from the start within which the frames differ (0: all equal); -1 if their lengths differ
 * or they differ beyond what a template holds. */
static int template_len(const struct frame *frames, int n)
{
	int len = 0;

	for (int i = 1; i < n; i++) {
		if (frames[i].len != frames[0].len)
			return -1;
		for (int b = frames[0].len - 1; b >= len; b--) {
			if (frames[i].data[b] != frames[0].data[b]) {
				len = b + 1;
				break;
			}
		}
	}
	return len <= MIX_TEMPLATE_MAX ? len : -1;
}

static int write_templates(struct xdp_gen_bpf *skel, const struct frame *frames, int n)
{
	int fd = bpf_map__fd(skel->maps.gen_templates);
	__u8 tmpl[MIX_TEMPLATE_MAX];

	for (__u32 i = 0; i < (__u32)n; i++) {
		__u32 len = frames[i].len < sizeof(tmpl) ? frames[i].len : sizeof(tmpl);

		memset(tmpl, 0, sizeof(tmpl));
		memcpy(tmpl, frames[i].data, len);
		if (bpf_map_update_elem(fd, &i, tmpl, BPF_ANY))
			return -errno;
	}
	return 0;
}

static void print_mixed(struct xdp_gen_bpf *skel, const struct options *o, int n, int tlen,
			__u32 frame_len, double seconds)
{
	const struct xdp_gen_bpf__bss *st = skel->bss;
	double span = (st->gen_last_ns - st->gen_start_ns) / 1e9;
	int fd = bpf_map__fd(skel->maps.gen_sent);

	printf("{\"frames\": %llu, \"seconds\": %.6f, \"pps\": %.0f, \"target_pps\": %.0f, "
	       "\"span_s\": %.6f, \"paced_pps\": %.0f, \"slips\": %llu, \"slipped_us\": %.1f, "
	       "\"slack_us\": %llu, \"max_late_us\": %.1f, \"batch\": %u, \"flows\": %d, "
	       "\"template_bytes\": %d, \"frame_bytes\": %u, \"per_flow\": [",
	       (unsigned long long)st->gen_seq, seconds, st->gen_seq / seconds, o->pps, span,
	       st->gen_seq > 1 && span > 0 ? (st->gen_seq - 1) / span : 0.0,
	       (unsigned long long)st->gen_slips, st->gen_slipped_ns / 1e3,
	       (unsigned long long)o->slack_us, st->gen_max_late_ns / 1e3, o->batch, n, tlen,
	       frame_len);
	for (__u32 i = 0; i < (__u32)n; i++) {
		__u64 sent = 0;

		bpf_map_lookup_elem(fd, &i, &sent);
		printf("%s%llu", i ? ", " : "", (unsigned long long)sent);
	}
	printf("]}\n");
}

static int run_mixed(const struct options *o, int ifindex, struct frame *frames, int n)
{
	int tlen = template_len(frames, n), err = 0, ret;
	struct xdp_gen_bpf *skel;
	double start;

	if (o->spread > 1 && (o->spread_off + 2 > (long)frames[0].len)) {
		fprintf(stderr, "dpp-pktgen: -S %ld: the frames have %u bytes\n", o->spread_off,
			frames[0].len);
		return 1;
	}
	for (__u32 i = 0; i < o->ncsums; i++) {
		if (o->csum_off[i] + 2 > (long)frames[0].len) {
			fprintf(stderr, "dpp-pktgen: -C %ld: the frames have %u bytes\n",
				o->csum_off[i], frames[0].len);
			return 1;
		}
	}
	if (tlen < 0 || n > MIX_MAX_FRAMES) {
		fprintf(stderr, "dpp-pktgen: -m needs at most %d frames of one length that "
			"differ only in their first %d bytes\n", MIX_MAX_FRAMES, MIX_TEMPLATE_MAX);
		return 1;
	}
	/* The template restores the spread number and its checksums each frame: live frames reuse
	 * their pages. */
	if (o->spread > 1 && tlen < o->spread_off + 2)
		tlen = (int)o->spread_off + 2;
	if (tlen > MIX_TEMPLATE_MAX) {
		fprintf(stderr, "dpp-pktgen: -S %ld lies beyond the first %d bytes\n", o->spread_off,
			MIX_TEMPLATE_MAX);
		return 1;
	}
	for (__u32 i = 0; i < o->ncsums; i++) {
		if (o->csum_off[i] + 2 > MIX_TEMPLATE_MAX) {
			fprintf(stderr, "dpp-pktgen: -C %ld lies beyond the first %d bytes\n",
				o->csum_off[i], MIX_TEMPLATE_MAX);
			return 1;
		}
		if (tlen < o->csum_off[i] + 2)
			tlen = (int)o->csum_off[i] + 2;
	}
	skel = xdp_gen_bpf__open();
	if (!skel) {
		fprintf(stderr, "dpp-pktgen: opening the generator program: %s\n", strerror(errno));
		return 1;
	}
	skel->rodata->tmpl_len = tlen;
	skel->rodata->nflows = n;
	skel->rodata->period_ps = o->pps > 0 ? (__u64)(1e12 / o->pps + 0.5) : 0;
	skel->rodata->slack_ns = o->slack_us * 1000;
	skel->rodata->spread = o->spread;
	skel->rodata->spread_off = o->spread > 1 ? (__u32)o->spread_off : 0;
	skel->rodata->ncsums = o->ncsums;
	for (__u32 i = 0; i < o->ncsums; i++)
		skel->rodata->csum_off[i] = (__u32)o->csum_off[i];
	ret = xdp_gen_bpf__load(skel);
	if (!ret)
		ret = write_templates(skel, frames, n);
	if (ret) {
		fprintf(stderr, "dpp-pktgen: loading the generator program: %s\n", strerror(-ret));
		err = 1;
		goto cleanup;
	}
	start = now_s();
	ret = send_frame(bpf_program__fd(skel->progs.xdp_gen), ifindex, &frames[0], o->per_packet,
			 o->batch);
	if (ret) {
		fprintf(stderr, "dpp-pktgen: live-frame test run on %s: %s\n", o->ifname,
			strerror(-ret));
		err = 1;
		goto cleanup;
	}
	print_mixed(skel, o, n, tlen, frames[0].len, now_s() - start);
cleanup:
	xdp_gen_bpf__destroy(skel);
	return err;
}

static int run_rounds(const struct options *o, int ifindex, struct frame *frames, int n)
{
	struct xdp_tx_bpf *skel = xdp_tx_bpf__open_and_load();
	unsigned long long sent = 0;
	int err = 0;
	double start;

	if (!skel) {
		fprintf(stderr, "dpp-pktgen: loading the XDP_TX program: %s\n", strerror(errno));
		return 1;
	}
	start = now_s();
	for (__u32 r = 0; r < o->rounds && !err; r++) {
		for (int i = 0; i < n; i++) {
			int ret = send_frame(bpf_program__fd(skel->progs.xdp_tx), ifindex,
					     &frames[i], o->per_packet / o->rounds, o->batch);

			if (ret) {
				fprintf(stderr, "dpp-pktgen: live-frame test run on %s: %s\n",
					o->ifname, strerror(-ret));
				err = 1;
				break;
			}
			sent += o->per_packet / o->rounds;
		}
	}
	printf("{\"frames\": %llu, \"seconds\": %.6f, \"pps\": %.0f}\n", sent, now_s() - start,
	       sent / (now_s() - start));
	xdp_tx_bpf__destroy(skel);
	return err;
}

static bool csum_offsets_valid(const struct options *o)
{
	for (__u32 i = 0; i < o->ncsums; i++)
		if (o->csum_off[i] < 0)
			return false;
	return true;
}

/* 0 when the options make sense, else the exit status (usage printed). */
static int parse_options(int argc, char **argv, struct options *o)
{
	int opt;

	*o = (struct options){ .per_packet = 1, .rounds = 1, .batch = 64, .cpu = -1,
			       .slack_us = DEFAULT_SLACK_US, .spread = 1, .spread_off = -1 };
	while ((opt = getopt(argc, argv, "i:r:n:R:b:c:mp:L:s:S:C:h")) != -1) {
		switch (opt) {
		case 'i': o->ifname = optarg; break;
		case 'r': o->pcap = optarg; break;
		case 'n': o->per_packet = strtoul(optarg, NULL, 0); break;
		case 'R': o->rounds = strtoul(optarg, NULL, 0); break;
		case 'b': o->batch = strtoul(optarg, NULL, 0); break;
		case 'c': o->cpu = atoi(optarg); break;
		case 'm': o->mixed = true; break;
		case 'p': o->pps = strtod(optarg, NULL); break;
		case 'L': o->slack_us = strtoull(optarg, NULL, 0); break;
		case 's': o->spread = strtoul(optarg, NULL, 0); break;
		case 'S': o->spread_off = strtol(optarg, NULL, 0); break;
		case 'C':
			if (o->ncsums == MIX_CSUMS_MAX) {
				fprintf(stderr, "dpp-pktgen: -C: at most %d checksums\n",
					MIX_CSUMS_MAX);
				return 2;
			}
			o->csum_off[o->ncsums++] = strtol(optarg, NULL, 0);
			break;
		default: usage(argv[0]); return opt == 'h' ? 0 : 2;
		}
	}
	if (!o->ifname || !o->pcap || !o->rounds || o->per_packet < o->rounds || o->pps < 0 ||
	    (o->pps > 0 && !o->mixed) || !o->spread ||
	    (o->spread > 1 && (!o->mixed || o->spread_off < 0)) ||
	    (o->ncsums && o->spread <= 1) || !csum_offsets_valid(o)) {
		usage(argv[0]);
		return 2;
	}
	return -1;
}

static int pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set)) {
		fprintf(stderr, "dpp-pktgen: cannot run on CPU %d: %s\n", cpu, strerror(errno));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct frame *frames = NULL;
	struct options o;
	int n, ifindex, err;

	err = parse_options(argc, argv, &o);
	if (err >= 0)
		return err;
	if (o.cpu >= 0 && pin_to_cpu(o.cpu))
		return 1;
	ifindex = if_nametoindex(o.ifname);
	if (!ifindex) {
		fprintf(stderr, "dpp-pktgen: no interface %s in this network namespace\n",
			o.ifname);
		return 1;
	}
	frames = calloc(MAX_FRAMES, sizeof(*frames));
	if (!frames)
		return 1;
	n = read_pcap(o.pcap, frames);
	if (n <= 0) {
		fprintf(stderr, "dpp-pktgen: %s: %s\n", o.pcap,
			n == 0 ? "no frames" :
			n == -EPROTO ? "not an Ethernet pcap file" : strerror(-n));
		err = 1;
	} else {
		err = o.mixed ? run_mixed(&o, ifindex, frames, n) :
				run_rounds(&o, ifindex, frames, n);
	}
	free(frames);
	return err;
}
