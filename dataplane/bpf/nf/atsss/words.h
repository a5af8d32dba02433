/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The control plane's writer of a session's own words in place (dpp_atsss_session_words), run once
 * per change by BPF_PROG_TEST_RUN with the words as its data: the session's values cannot be
 * mapped into user space (a map whose values hold a bpf_spin_lock has no mmap, and a hash map none
 * at all), and a write of the whole value through the map would overwrite the MP_SEQ counter and
 * weighted round-robin's state that packets move meanwhile (a number given twice). Here each of
 * the session's own words is one store, which a packet on another CPU reads old or new, and the
 * words the packets move are not written (netapp/atsss/table.py says what a packet may meet
 * between the stores, and why it is harmless). */
#ifndef DPP_NF_ATSSS_WORDS_H
#define DPP_NF_ATSSS_WORDS_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/maps.h"

/* The positions' words: weights, path slots, priorities, one aligned 8-byte store each. */
static __always_inline void atsss_store_positions(struct dpp_atsss_session *s,
						  const struct dpp_atsss_session_words *w)
{
	*(volatile __u64 *)s->weight = w->weight;
	*(volatile __u64 *)&s->path[0] = w->path[0];
	*(volatile __u64 *)&s->path[2] = w->path[1];
	*(volatile __u64 *)s->priority = w->priority;
}

/* The control word (mode, n_paths, flags, tx_group) by an exchange: one store, and a full barrier
 * on every JIT, so that the positions' stores before it are seen before it, those after it after. */
static __always_inline void atsss_store_control(struct dpp_atsss_session *s, __u32 control)
{
	__sync_lock_test_and_set((__u32 *)&s->mode, control);
}

_Static_assert(__builtin_offsetof(struct dpp_atsss_session, mode) == 4 &&
		       __builtin_offsetof(struct dpp_atsss_session, tx_group) == 7,
	       "the control word is the four bytes after the lock");
_Static_assert(__builtin_offsetof(struct dpp_atsss_session, priority) % 8 == 0 &&
		       __builtin_offsetof(struct dpp_atsss_session, mp_seq) ==
			       __builtin_offsetof(struct dpp_atsss_session, priority) + 8,
	       "the priorities' word ends where the MP_SEQ counter begins");

/* XDP_PASS: written; XDP_DROP: no such session (the control plane writes it whole instead);
 * XDP_ABORTED: data shorter than the words. */
SEC("xdp")
int dpp_atsss_session_set(struct xdp_md *ctx)
{
	const struct dpp_atsss_session_words *w = (void *)(long)ctx->data;
	struct dpp_atsss_session *s;

	if ((void *)(w + 1) > (void *)(long)ctx->data_end)
		return XDP_ABORTED;
	if (w->slot)
		s = bpf_map_lookup_elem(&dpp_atsss_slots, &w->slot);
	else
		s = bpf_map_lookup_elem(&dpp_atsss_sessions, &w->key);
	if (!s)
		return XDP_DROP;
	if (w->fewer)
		atsss_store_control(s, w->control);
	atsss_store_positions(s, w);
	if (!w->fewer)
		atsss_store_control(s, w->control);
	return XDP_PASS;
}

#endif /* DPP_NF_ATSSS_WORDS_H */
