/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The downlink: a packet to a UE with a session goes, whole, into MP-DCCP on the path its
 * session's scheduler picks: Ethernet (the path's next hop) / IPv4 or IPv6 (protocol 33, from our
 * address on that access to the UE's) / DCCP-Data with the path's sequence number and the MP_SEQ
 * option / the UE packet. */
#ifndef DPP_NF_ATSSS_DOWNLINK_H
#define DPP_NF_ATSSS_DOWNLINK_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/maps.h"
#include "nf/atsss/index.h"
#include "nf/atsss/schedule.h"
#include "nf/atsss/dccp.h"
#include "nf/atsss/inner_sum.h"
#include "nf/atsss/bytes_sum.h"
#include "nf/atsss/redundant.h"
#include "nf/atsss/flows.h"
#include "core/outcome.h"
#include "proto/eth.h"

#define ATSSS_ENCAP4 (sizeof(struct iphdr) + sizeof(struct atsss_dccp_data))
#define ATSSS_ENCAP6 (sizeof(struct ipv6hdr) + sizeof(struct atsss_dccp_data))
/* UE packets this function carries at most: csum_packet's reach (nf/upf/csum.h) */
#define ATSSS_MAX_UE_LEN (UPF_CSUM_CHUNK * UPF_CSUM_CHUNKS - ATSSS_ENCAP6)

/* What the downlink decided for a packet. */
enum atsss_verdict {
	ATSSS_NO_SESSION = 0, /* not a UE of ours: the packet goes on untouched */
	ATSSS_SENT = 1,	      /* encapsulated, ready to leave on the picked path */
	ATSSS_NO_PATH = 2,    /* every path of the session is down */
	ATSSS_ERROR = 3,      /* the packet could not be made so (no headroom, too long) */
	ATSSS_COPIES = 4,     /* REDUNDANT: marked for a copy on every path up, to broadcast */
};

/* The outer IPv4 header from src to dst (address words as the ABI holds them; addr_sum, their sum)
 * of a DCCP packet, as five 32-bit stores whose sum gives its checksum: nothing is read back, from
 * the packet or from the path (the compiler cannot know the packet's stores leave the path alone).
 * The uplink's Acks to the UE; the downlink's IPv4 paths copy their template (atsss_fill_head4). */
static __always_inline void atsss_fill_ipv4(struct iphdr *ip, __be32 src, __be32 dst, __u64 addr_sum,
					    __u32 dccp_len)
{
	__u32 *w = (__u32 *)ip;
	__u64 sum;

	w[0] = bpf_htonl(0x45 << 24 | (sizeof(*ip) + dccp_len)); /* version, IHL, TOS 0, length */
	w[1] = bpf_htonl(DPP_ATSSS_IP_DF);			  /* ID 0, flags and offset */
	w[2] = bpf_htonl(DPP_ATSSS_TTL << 24 | DPP_ATSSS_IPPROTO_DCCP << 16); /* checksum 0 */
	w[3] = src;
	w[4] = dst;
	sum = (__u64)w[0] + w[1] + w[2] + addr_sum;
	ip->check = (__u16)~csum_fold(sum);
}

/* A 16-bit value at the first two bytes of a 64-bit word in memory, as a number to or into it. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ATSSS_FIRST16(v) ((__u64)(__u16)(v))
#else
#define ATSSS_FIRST16(v) ((__u64)(__u16)(v) << 48)
#endif

/* An IPv4 path's Ethernet, IPv4 and DCCP ports copied from its template (struct dpp_atsss_path's
 * head4: 38 bytes in four 8-byte, one 4-byte and one 2-byte stores), with the total length and the
 * header checksum (ip_sum, the template's sum, read before the packet's stores, plus the length's)
 * put into their words on the way: the length starts the third word, the checksum the fourth. */
static __always_inline void atsss_fill_head4(void *frame, const struct dpp_atsss_path *p, __u32 ip_sum,
					     __u32 dccp_len)
{
	const __u64 *t = (const __u64 *)p->head4;
	__u64 *f = frame;
	__u16 len = bpf_htons(sizeof(struct iphdr) + dccp_len);
	__u32 sum = ip_sum + len;

	sum = (sum & 0xffff) + (sum >> 16); /* two 16-bit numbers: one fold is enough */
	f[0] = t[0];
	f[1] = t[1];
	f[2] = t[2] | ATSSS_FIRST16(len);
	f[3] = t[3] | ATSSS_FIRST16(~sum);
	*(__u32 *)(frame + 32) = *(const __u32 *)(p->head4 + 32);
	*(__u16 *)(frame + 36) = *(const __u16 *)(p->head4 + 36);
}

_Static_assert(sizeof(struct ethhdr) + __builtin_offsetof(struct iphdr, tot_len) == 2 * 8 &&
		       sizeof(struct ethhdr) + __builtin_offsetof(struct iphdr, check) == 3 * 8 &&
		       sizeof(struct ethhdr) + sizeof(struct iphdr) + 4 == 38 && DPP_ATSSS_HEAD4_LEN >= 38,
	       "the template's words: the length starts the third, the checksum the fourth");

static __always_inline void atsss_fill_ipv6(struct ipv6hdr *ip6, const __be32 *src, const __be32 *dst,
					    __u32 dccp_len)
{
	*(__be32 *)ip6 = bpf_htonl(6 << 28);
	ip6->payload_len = bpf_htons(dccp_len);
	ip6->nexthdr = DPP_ATSSS_IPPROTO_DCCP;
	ip6->hop_limit = DPP_ATSSS_TTL;
	__builtin_memcpy(&ip6->saddr, src, sizeof(ip6->saddr));
	__builtin_memcpy(&ip6->daddr, dst, sizeof(ip6->daddr));
}

/* The Ethernet header to the path's next hop as seven 16-bit stores of the path's words (its MAC
 * addresses start at even offsets of struct dpp_atsss_path): a byte-wise copy of the addresses, which
 * is what memcpy into the packet's unaligned header compiles to, is 12 loads and 12 stores. */
static __always_inline void atsss_fill_eth(struct ethhdr *eth, const struct dpp_atsss_path *p, __be16 proto)
{
	eth_set_addrs(eth, p->dmac, p->smac);
	((__u16 *)eth)[6] = proto;
}

_Static_assert(__builtin_offsetof(struct dpp_atsss_path, smac) % 2 == 0 &&
		       __builtin_offsetof(struct dpp_atsss_path, dmac) % 2 == 0,
	       "the path's MAC addresses are read as 16-bit words");

/* An IPv6 path's addresses summed, for the DCCP checksum's pseudo-header. */
static __always_inline __u64 atsss_addr_sum6(const struct dpp_atsss_path *p)
{
	return (__u64)p->local[0] + p->local[1] + p->local[2] + p->local[3] + p->peer[0] + p->peer[1] +
	       p->peer[2] + p->peer[3];
}

/* The UE packet's sum from its bytes (atsss_bytes_sum), in a function of its own: inlined into each
 * copy of the encapsulation, its loads made xdp_atsss 1,700 instructions longer and the ways that do
 * not sum spill registers (round-robin CsCov 1 and with the sum derived executed 5 and 10 more). */
static __noinline __s64 atsss_ue_bytes_sum(struct xdp_md *ctx, __u32 off, __u32 ue_len)
{
	return atsss_bytes_sum(ctx, off, ue_len);
}

/* Frame the headers in front of the UE packet, which starts right after them (ue_len bytes); the
 * DCCP checksum covers the UE packet unless cscov is 1 (enum dpp_atsss_session_flags), with ue_sum
 * its sum, or summed here when ue_sum is -1. `family`: the path's, a constant (atsss_encap). */
static __always_inline int atsss_fill(struct xdp_md *ctx, const struct dpp_atsss_path *p, __u64 seq,
				      __u64 mp_seq, __u32 ue_len, __u8 cscov, __s64 ue_sum, const __u8 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	const __u32 ip_len = family == 4 ? sizeof(struct iphdr) : sizeof(struct ipv6hdr);
	__u32 dccp_len = sizeof(struct atsss_dccp_data) + ue_len;
	struct atsss_dccp_data *d;
	__u64 header_sum, outer_sum; /* the DCCP header's words; the addresses' (IPv4: and the ports') */
	__u32 ip_sum;

	/* the UE packet is longer than IPv6's 40 - 20: the frame holds either family's headers, which
	 * bounds d + 1 for the verifier too */
	if (data + sizeof(*eth) + ATSSS_ENCAP6 > end)
		return -1;
	/* the path's words read before the packet's stores, which may alias p for clang */
	if (family == 4) {
		outer_sum = p->head4_dccp_sum;
		ip_sum = p->head4_ip_sum;
		atsss_fill_head4(eth, p, ip_sum, dccp_len);
		d = (void *)(eth + 1) + sizeof(struct iphdr);
		header_sum = atsss_fill_dccp_words(d, seq, mp_seq, cscov);
	} else {
		outer_sum = atsss_addr_sum6(p);
		atsss_fill_eth(eth, p, bpf_htons(ETH_P_IPV6));
		atsss_fill_ipv6((void *)(eth + 1), p->local, p->peer, dccp_len);
		d = (void *)(eth + 1) + sizeof(struct ipv6hdr);
		header_sum = atsss_fill_dccp(d, p->sport, p->dport, seq, mp_seq, cscov);
	}
	/* summed here, not after the UE packet's sum: clang would keep the seven words on the stack */
	barrier_var(header_sum);
	if (cscov) {
		ue_sum = 0;
	} else if (ue_sum < 0) {
		ue_sum = atsss_ue_bytes_sum(ctx, sizeof(*eth) + ip_len + sizeof(*d), ue_len);
		if (ue_sum < 0)
			return -1;
		data = (void *)(long)ctx->data;
		d = data + sizeof(*eth) + ip_len;
		if ((void *)(d + 1) > (void *)(long)ctx->data_end)
			return -1;
	}
	d->check = atsss_dccp_check(header_sum, outer_sum, dccp_len, ue_sum);
	return 0;
}

/* atsss_encap for a path of `family` (4 or 6, a constant: its headers' sizes are the compiler's). */
static __always_inline int atsss_encap_family(struct xdp_md *ctx, const struct dpp_atsss_path *p, __u64 seq,
					      __u64 mp_seq, __u32 l3, __u32 ue_len, __u8 cscov, const __u8 family)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 frame_len = end - data;
	const int hdr = family == 4 ? ATSSS_ENCAP4 : ATSSS_ENCAP6;
	__s64 ue_sum;

	if (ue_len > ATSSS_MAX_UE_LEN || l3 + ue_len > frame_len)
		return -1;
	/* the UE packet's sum from its own checksum, read before the frame's ends move */
	ue_sum = cscov ? 0 : atsss_inner_sum(data + bounded_offset(l3), end, ue_len);
	if (l3 + ue_len < frame_len && bpf_xdp_adjust_tail(ctx, (int)(l3 + ue_len) - (int)frame_len))
		return -1;
	/* the Ethernet header stays where it is relative to the new start: it is rewritten whole */
	if (bpf_xdp_adjust_head(ctx, (int)(bounded_offset(l3) - sizeof(struct ethhdr)) - hdr))
		return -1;
	return atsss_fill(ctx, p, seq, mp_seq, ue_len, cscov, ue_sum, family);
}

/* Put the UE packet at l3 (ue_len bytes: what is after it, link padding, goes) behind the path's
 * outer headers. 0, or -1 when it could not be made so. A copy for each family, and IPv4's for each
 * CsCov: the headers' sizes, which are written and whether the UE packet is summed are then known
 * where the code is made, not tested again at each step (an IPv4 CsCov 1 packet executes 27
 * instructions fewer, the others 13 to 16; the program is some 1,100 instructions longer;
 * bench/README.md, "Round-robin's margin"). */
static __always_inline int atsss_encap(struct xdp_md *ctx, const struct dpp_atsss_path *p, __u64 seq,
				       __u64 mp_seq, __u32 l3, __u32 ue_len, __u8 cscov)
{
	__u8 family = p->family;

	if (family == 4 && cscov)
		return atsss_encap_family(ctx, p, seq, mp_seq, l3, ue_len, 1, 4);
	if (family == 4)
		return atsss_encap_family(ctx, p, seq, mp_seq, l3, ue_len, 0, 4);
	if (family == 6)
		return atsss_encap_family(ctx, p, seq, mp_seq, l3, ue_len, cscov, 6);
	return -1;
}

/* The path's counters moved: atomic adds on its second line (include/dpp/nf/atsss.h says why not
 * per CPU), which the scheduler read with the path (atsss_warm_counters). */
static __always_inline void atsss_count(struct dpp_atsss_path *p, __u32 ue_len)
{
	__sync_fetch_and_add(&p->packets, 1);
	__sync_fetch_and_add(&p->bytes, ue_len);
}

/* The CsCov of a session's packets (RFC 4340 9.2): 1, the header only, when it asks for it. */
static __always_inline __u8 atsss_cscov(__u8 session_flags)
{
	return session_flags & DPP_ATSSS_HEADER_CHECKSUM ? 1 : 0;
}

/* The UE packet at l3 (ue_len bytes) put into MP-DCCP on the path p, numbered mp_seq, checksummed
 * as its session's flags say. */
static __always_inline enum atsss_verdict atsss_send_on(struct xdp_md *ctx, struct dpp_atsss_path *p, __u64 mp_seq,
							__u32 l3, __u32 ue_len, __u8 session_flags)
{
	__u64 seq;

	/* one atomic add, not a block of numbers per CPU: the numbers a block leaves unused would be
	 * reported not received by the UE's Ack Vector, counted lost by the path's loss estimate
	 * (nf/atsss/loss.h judges every number it passes), and a block used late falls behind the
	 * UE's sequence window (RFC 4340 7.5.1), which drops its packets */
	seq = __sync_fetch_and_add(&p->dccp_seq, 1) & ATSSS_SEQ_MASK;
	if (atsss_encap(ctx, p, seq, mp_seq & ATSSS_SEQ_MASK, l3, ue_len, atsss_cscov(session_flags)))
		return ATSSS_ERROR;
	atsss_count(p, ue_len);
	return ATSSS_SENT;
}

/* As atsss_send_on, the path by its slot. */
static __always_inline enum atsss_verdict atsss_send(struct xdp_md *ctx, __u32 slot, __u64 mp_seq, __u32 l3,
						     __u32 ue_len, __u8 session_flags)
{
	struct dpp_atsss_path *p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);

	if (!p)
		return ATSSS_ERROR;
	return atsss_send_on(ctx, p, mp_seq, l3, ue_len, session_flags);
}

/* The downlink of a flow whose MTS session has a scheduler state `f` of its own (nf/atsss/flows.h)
 * in `mode`, round-robin or weighted: its path picked with the state's turns or running weights, its
 * MP_SEQ number the session's. Apart from the session's own way, so that a frame of a session
 * without flow rules carries no state pointer across its scheduler (the state's test and its
 * register cost 1 to 8 instructions there, bench/README.md). */
static __always_inline enum atsss_verdict atsss_flow_downlink(struct xdp_md *ctx, struct dpp_atsss_session *s,
							      struct dpp_atsss_flow_state *f, __u8 mode, __u32 l3,
							      __u32 ue_len)
{
	struct dpp_atsss_path *p;
	struct atsss_paths_view v;
	__u64 mp_seq = 0;
	__u32 slot;
	int pos;

	if (mode == DPP_ATSSS_ROUND_ROBIN) {
		p = schedule_round_robin_flow(s, f, &mp_seq);
		if (!p)
			return ATSSS_NO_PATH;
	} else {
		v = atsss_view_paths(s, false);
		pos = v.up ? schedule_weighted(s, &f->lock, f->current, v.up, &mp_seq, &p) : -1;
		if (pos < 0)
			return ATSSS_NO_PATH;
		if (!p) { /* the pick was not its guess */
			slot = s->path[pos & (DPP_ATSSS_MAX_PATHS - 1)];
			p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);
			if (!p)
				return ATSSS_ERROR;
		}
	}
	return atsss_send_on(ctx, p, mp_seq, l3, ue_len, s->flags); /* one send for both: one copy of it */
}

/* The downlink for the UE packet at l3 (family 4 or 6, ue_len bytes) to the UE address `ue`: in
 * the mode of its flow's rule when the session has flow rules (nf/atsss/flows.h), and with its MTS
 * session's scheduler state when it has one (round-robin, weighted: atsss_flow_downlink), else the
 * session's mode and state. */
static __always_inline enum atsss_verdict atsss_downlink(struct xdp_md *ctx, __u8 family, const __u32 *ue,
							 __u32 l3, __u32 ue_len)
{
	struct dpp_atsss_session *s = atsss_find_session(family, ue, true);
	struct dpp_atsss_flow_state *f;
	struct dpp_atsss_path *p;
	__u64 mp_seq = 0;
	__u32 up, slot, arg;
	bool flows;
	__u8 mode;
	int pos;

	if (!s || !s->n_paths)
		return ATSSS_NO_SESSION;
	mode = s->mode;
	flows = atsss_has_flow_rules(s);
	if (flows) {
		arg = atsss_flow_arg(ctx, mode);
		mode = atsss_arg_mode(arg);
		f = atsss_flow_state(arg);
		if (f && (mode == DPP_ATSSS_ROUND_ROBIN || mode == DPP_ATSSS_WEIGHTED))
			return atsss_flow_downlink(ctx, s, f, mode, l3, ue_len);
	}
	if (mode == DPP_ATSSS_ROUND_ROBIN) {
		/* two ways, each with its add a constant: without flow rules the one of before */
		p = flows ? schedule_round_robin(s, &mp_seq, true) : schedule_round_robin(s, &mp_seq, false);
		return p ? atsss_send_on(ctx, p, mp_seq, l3, ue_len, s->flags) : ATSSS_NO_PATH;
	}
	pos = atsss_schedule(s, mode, &mp_seq, &up, &p);
	if (pos < 0)
		return ATSSS_NO_PATH;
	if (pos == ATSSS_EVERY_PATH)
		return atsss_mark_copies(ctx, s, up, mp_seq, l3, ue_len) ? ATSSS_ERROR : ATSSS_COPIES;
	if (!p) { /* WEIGHTED's pick was not its guess; looked up here, so that one send is inlined */
		slot = s->path[pos & (DPP_ATSSS_MAX_PATHS - 1)];
		p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);
		if (!p)
			return ATSSS_ERROR;
	}
	return atsss_send_on(ctx, p, mp_seq, l3, ue_len, s->flags);
}

/* A REDUNDANT frame's copy on its way out by the entry of dpp_atsss_tx for `position` (a constant):
 * encapsulated for the session's path there, or dropped when the session has none up there. */
static __always_inline int atsss_copy_out(struct xdp_md *ctx, const __u32 position)
{
	struct atsss_copy_meta *m = (void *)(long)ctx->data_meta, copy;

	if ((void *)(m + 1) > (void *)(long)ctx->data)
		return XDP_DROP; /* not a marked frame */
	copy = *m; /* the metadata moves with the head */
	if (!copy.path[position])
		return XDP_DROP;
	return atsss_send(ctx, copy.path[position], copy.mp_seq, copy.l3, copy.ue_len, copy.flags) == ATSSS_SENT
		       ? XDP_PASS
		       : XDP_DROP;
}

#endif /* DPP_NF_ATSSS_DOWNLINK_H */
