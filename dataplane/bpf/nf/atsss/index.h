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

/* The session of the UE address `ue` (family 4 or 6), or NULL. Each lookup is followed by
 * barrier_var: without it clang may make the two one call of a map chosen before it, which the
 * verifier cannot inline (the array's lookup then costs a helper call; bench/bpf/atsss_stages.bpf.c's
 * programs had it). */
static __always_inline struct dpp_atsss_session *atsss_find_session(__u8 family, const __be32 *ue)
{
	struct dpp_atsss_session_key key = { .family = family };
	__u32 slot = family == 4 ? atsss_index4_slot(ue[0]) : atsss_index6_slot(ue);
	struct dpp_atsss_session *s;

	if (slot) {
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
