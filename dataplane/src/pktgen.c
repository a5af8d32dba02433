// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* dpp-pktgen: a traffic generator for veth testbeds. Sends the frames of a pcap file out of an
 * interface at kernel speed with BPF_PROG_TEST_RUN in live-frame mode (an XDP_TX program run on
 * the frames as if they had arrived there; the frames leave towards the interface's peer). */
#include <errno.h>
#include <getopt.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "xdp_tx.skel.h"

#define PCAP_MAGIC_US 0xa1b2c3d4u
#define PCAP_MAGIC_NS 0xa1b23c4du
#define MAX_FRAME 4096
#define MAX_FRAMES 4096

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
		"Sends every frame of PCAP (Ethernet, little-endian pcap) FRAMES_PER_PACKET times out of\n"
		"IFACE, interleaved over ROUNDS rounds. Prints frames sent and the rate achieved.\n"
		"Each frame of each round is one live-frame test run, and every run costs the kernel\n"
		"tens of milliseconds of set-up: keep ROUNDS small (default 1) and FRAMES large.\n",
		prog);
}

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

int main(int argc, char **argv)
{
	const char *ifname = NULL, *pcap = NULL;
	__u32 per_packet = 1, rounds = 1, batch = 64;
	struct xdp_tx_bpf *skel = NULL;
	struct frame *frames = NULL;
	int opt, n, ifindex, err = 0;
	unsigned long long sent = 0;
	double start;

	while ((opt = getopt(argc, argv, "i:r:n:R:b:h")) != -1) {
		switch (opt) {
		case 'i': ifname = optarg; break;
		case 'r': pcap = optarg; break;
		case 'n': per_packet = strtoul(optarg, NULL, 0); break;
		case 'R': rounds = strtoul(optarg, NULL, 0); break;
		case 'b': batch = strtoul(optarg, NULL, 0); break;
		default: usage(argv[0]); return opt == 'h' ? 0 : 2;
		}
	}
	if (!ifname || !pcap || !rounds || per_packet < rounds) {
		usage(argv[0]);
		return 2;
	}
	ifindex = if_nametoindex(ifname);
	if (!ifindex) {
		fprintf(stderr, "dpp-pktgen: no interface %s in this network namespace\n", ifname);
		return 1;
	}
	frames = calloc(MAX_FRAMES, sizeof(*frames));
	if (!frames)
		return 1;
	n = read_pcap(pcap, frames);
	if (n <= 0) {
		fprintf(stderr, "dpp-pktgen: %s: %s\n", pcap,
			n == 0 ? "no frames" : n == -EPROTO ? "not an Ethernet pcap file" : strerror(-n));
		err = 1;
		goto cleanup;
	}
	skel = xdp_tx_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "dpp-pktgen: loading the XDP_TX program: %s\n", strerror(errno));
		err = 1;
		goto cleanup;
	}

	start = now_s();
	for (__u32 r = 0; r < rounds && !err; r++) {
		for (int i = 0; i < n; i++) {
			int ret = send_frame(bpf_program__fd(skel->progs.xdp_tx), ifindex, &frames[i],
					     per_packet / rounds, batch);

			if (ret) {
				fprintf(stderr, "dpp-pktgen: live-frame test run on %s: %s\n", ifname,
					strerror(-ret));
				err = 1;
				break;
			}
			sent += per_packet / rounds;
		}
	}
	printf("{\"frames\": %llu, \"seconds\": %.6f, \"pps\": %.0f}\n", sent, now_s() - start,
	       sent / (now_s() - start));
cleanup:
	xdp_tx_bpf__destroy(skel);
	free(frames);
	return err;
}
