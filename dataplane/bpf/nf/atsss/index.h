/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A UE's session by its address: the way of its bucket of the index (dpp_atsss_index4 or 6) that
 * holds the address whole, then its slot of dpp_atsss_slots, all inlined array reads; when no way
 * holds it, dpp_atsss_sessions (the sessions whose bucket was full, until a way of it frees). A way
 * is taken only when its live bit is set and its address is the UE's, every word of it: another UE's
 * address in the same bucket, or a way being written (its bit clear), leads nowhere. */
#ifndef DPP_NF_ATSSS_INDEX_H
#define DPP_NF_ATSSS_INDEX_H

#include <linux/bpf.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/maps.h"

/* The UE filter's and the index's hash of an address (its four words, IPv4 in the first). */
static __always_inline __u32 atsss_ue_hash(const __be32 *addr)
{
	return bpf_ntohl(addr[0] ^ addr[1] ^ addr[2] ^ addr[3]) * DPP_ATSSS_UE_FILTER_MULTIPLIER;
}

/* The bucket's live bits, read before any way's address or slot: a way is written only while its
 * bit is clear (netapp/atsss/index.py). */
static __always_inline __u32 atsss_live_ways(const __u8 *live)
{
	__u32 bits = *(volatile const __u8 *)live;

	barrier();
	return bits;
}

/* The slot of the IPv4 UE's session, or 0. */
static __always_inline __u32 atsss_index4_slot(__be32 ue)
{
	__u32 bucket = (bpf_ntohl(ue) * DPP_ATSSS_UE_FILTER_MULTIPLIER) >> (32 - DPP_ATSSS_INDEX_LOG2), live;
	const struct dpp_atsss_index4 *b = bpf_map_lookup_elem(&dpp_atsss_index4, &bucket);
	int i;

	if (!b)
		return 0;
	live = atsss_live_ways(&b->live);
#pragma unroll
	for (i = 0; i < DPP_ATSSS_INDEX4_WAYS; i++)
		if ((live & (1u << i)) && b->addr[i] == ue)
			return b->slot[i];
	return 0;
}

/* The slot of the IPv6 UE's session, or 0. */
static __always_inline __u32 atsss_index6_slot(const __be32 *ue)
{
	__u32 bucket = atsss_ue_hash(ue) >> (32 - DPP_ATSSS_INDEX_LOG2), live;
	const struct dpp_atsss_index6 *b = bpf_map_lookup_elem(&dpp_atsss_index6, &bucket);
	int i;

	if (!b)
		return 0;
	live = atsss_live_ways(&b->live);
#pragma unroll
	for (i = 0; i < DPP_ATSSS_INDEX6_WAYS; i++)
		if ((live & (1u << i)) && b->addr[i][0] == ue[0] && b->addr[i][1] == ue[1] &&
		    b->addr[i][2] == ue[2] && b->addr[i][3] == ue[3])
			return b->slot[i];
	return 0;
}

/* The path slots placed beside the session in slot s of dpp_atsss_slots: 2s - 1 and 2s, its first
 * two positions' (most sessions have two paths, 3GPP and non-3GPP). The control plane gives a new
 * session's first two paths a free pair (netapp/atsss/admission.py, paired_slots) and the session
 * the slot paired with its first path when it is free (netapp/atsss/index.py, 6.); slot 0 is no
 * session, path slot 0 no path. */
#define ATSSS_PAIRED_PATHS 2

_Static_assert(DPP_MAX_ATSSS_PATHS >= DPP_MAX_ATSSS_SESSIONS * ATSSS_PAIRED_PATHS,
	       "every session slot's pair of path slots is a slot of dpp_atsss_paths");

/* The first lines of the paths placed beside the session in `slot` (ATSSS_PAIRED_PATHS), read for
 * their lines only, before the session's is: their addresses come from the bucket's slot, not
 * from the session's path[], so the CPU fetches them while the session's line is on its way, and
 * the path the scheduler then finds through path[] is in cache or arriving: the chain of dependent
 * lines is two deep, not three (bench/README.md, ATSSS, "The paths requested with the session").
 * A session whose paths lie elsewhere (another session's pair, a third path, a session in the
 * hash) reads its paths through path[] as before: the touch decides nothing, it only makes a later
 * line earlier. Volatile: the loads are kept, their values unused. */
static __always_inline void atsss_touch_paths(__u32 slot)
{
	const struct dpp_atsss_path *p;
	__u32 path;
	int i;

#pragma unroll
	for (i = 0; i < ATSSS_PAIRED_PATHS; i++) {
		path = slot * ATSSS_PAIRED_PATHS - 1 + i;
		p = bpf_map_lookup_elem(&dpp_atsss_paths, &path);
		if (p)
			(void)*(volatile const __u64 *)&p->dccp_seq;
	}
}

/* The session of the UE address `ue` (family 4 or 6), or NULL; with `touch_paths` (a constant: the
 * downlink's, which reads a path next) the paths placed beside a session of the index requested
 * first (atsss_touch_paths); a caller that only asks whether there is a session (atsss_mine) reads
 * no more. Each lookup is followed by barrier_var: without it clang may make the two one call of a
 * map chosen before it, which the verifier cannot inline (the array's lookup then costs a helper
 * call; bench/bpf/atsss_stages.bpf.c's programs had it). */
static __always_inline struct dpp_atsss_session *atsss_find_session(__u8 family, const __be32 *ue,
								    const bool touch_paths)
{
	struct dpp_atsss_session_key key = { .family = family };
	__u32 slot = family == 4 ? atsss_index4_slot(ue[0]) : atsss_index6_slot(ue);
	struct dpp_atsss_session *s;

	if (slot) {
		if (touch_paths)
			atsss_touch_paths(slot);
		s = bpf_map_lookup_elem(&dpp_atsss_slots, &slot);
		barrier_var(s);
		return s;
	}
	__builtin_memcpy(key.addr, ue, sizeof(key.addr));
	s = bpf_map_lookup_elem(&dpp_atsss_sessions, &key);
	barrier_var(s);
	return s;
}

#endif /* DPP_NF_ATSSS_INDEX_H */
