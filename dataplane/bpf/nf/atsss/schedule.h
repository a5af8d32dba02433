/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The schedulers: which of a session's paths carries the next downlink packet, and the packet's
 * MP_SEQ number, taken by atomic add; weighted round-robin's pick under the session's lock, the
 * others' without (include/dpp/nf/atsss.h argues why).
 * netapp/atsss/model.py is the reference the tests hold these against. */
#ifndef DPP_NF_ATSSS_SCHEDULE_H
#define DPP_NF_ATSSS_SCHEDULE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "dpp/nf/atsss.h"
#include "nf/atsss/maps.h"

/* What the scheduler reads of a session's paths, before the lock is taken (the lookups are helper
 * calls, which the verifier forbids under a lock): the positions whose path is up, as bits, those
 * of them not congested, and the position of the one with the smallest RTT among them. A path
 * marked down between this read and the pick still gets this one packet. */
struct atsss_paths_view {
	__u32 up;
	__u32 free; /* up and not congested */
	int fastest; /* -1: none up */
};

/* atsss_schedule's position for REDUNDANT: every path up. */
#define ATSSS_EVERY_PATH DPP_ATSSS_MAX_PATHS

/* An RTT to compare: unknown (0) after every known one. */
static __always_inline __u32 rtt_rank(const struct dpp_atsss_path *p)
{
	return p->rtt_us ? p->rtt_us : 0xffffffff;
}

/* With `order` false (a constant) only `up` is filled: round-robin, active-standby and redundant
 * read no more of the paths, and the compiler drops the rest from their way. */
static __always_inline struct atsss_paths_view atsss_view_paths(const struct dpp_atsss_session *s,
								const bool order)
{
	struct atsss_paths_view v = { .up = 0, .free = 0, .fastest = -1 };
	__u32 slot, best = 0;
	struct dpp_atsss_path *p;
	int i;

#pragma unroll
	for (i = 0; i < DPP_ATSSS_MAX_PATHS; i++) {
		if (i >= s->n_paths)
			break;
		slot = s->path[i];
		p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);
		if (!p || !slot || !(p->flags & DPP_ATSSS_PATH_UP))
			continue;
		v.up |= 1u << i;
		if (!order)
			continue;
		if (!(p->flags & DPP_ATSSS_PATH_CONGESTED))
			v.free |= 1u << i;
		if (v.fastest < 0 || rtt_rank(p) < best) {
			v.fastest = i;
			best = rtt_rank(p);
		}
	}
	return v;
}

/* Round-robin's turn among `n` positions: the number's low 32 bits mod n (a constant divisor is a
 * multiplication, a variable one a division: 1, 2 and 4 are masks). */
static __always_inline __u32 round_robin_turn(__u32 n, __u64 mp_seq)
{
	return n == 3 ? (__u32)mp_seq % 3 : (__u32)mp_seq & (n - 1);
}

/* Round-robin when the position a number falls on is down: of the positions up, the one its cycle
 * (its low 32 bits over the number of paths) falls on, counted from the first. Each position down
 * hands its cycles to the paths up in turn, so every path up gets an equal share. */
static __always_inline int pick_round_robin(__u32 up, __u32 cycle)
{
	__u32 n = (up & 1) + ((up >> 1) & 1) + ((up >> 2) & 1) + ((up >> 3) & 1);
	__u32 turn = round_robin_turn(n, cycle);
	int i;

#pragma unroll
	for (i = 0; i < DPP_ATSSS_MAX_PATHS; i++) {
		if (!(up & (1u << i)))
			continue;
		if (!turn)
			return i;
		turn--;
	}
	return -1;
}

/* The session's path at position i when it is up, or NULL. */
static __always_inline struct dpp_atsss_path *atsss_path_up(const struct dpp_atsss_session *s, int i)
{
	__u32 slot = s->path[i & (DPP_ATSSS_MAX_PATHS - 1)];
	struct dpp_atsss_path *p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);

	return p && slot && (p->flags & DPP_ATSSS_PATH_UP) ? p : NULL;
}

/* Smooth weighted round-robin (nginx's): every position that is up gains its weight, the largest
 * current weight is picked and loses the total. Over any sum(weights) picks each position is picked
 * exactly its weight's times, spread out rather than in bursts; a position that goes down keeps its
 * current weight until it is up again. `weight`: the session's; `current`: the running weights of
 * the frames picked together (the session's own, or an MTS session's flows', nf/atsss/flows.h).
 * With `take` false (a constant) nothing is written: the position the pick would be, read outside
 * the lock (schedule_weighted's guess). */
static __always_inline int pick_weighted(const __u16 *weight, __s32 *current, __u32 up, const bool take)
{
	__s32 total = 0, gained, best_current = 0;
	int i, best = -1;

#pragma unroll
	for (i = 0; i < DPP_ATSSS_MAX_PATHS; i++) {
		if (!(up & (1u << i)) || !weight[i])
			continue;
		gained = current[i] + weight[i];
		if (take)
			current[i] = gained;
		total += weight[i];
		if (best < 0 || gained > best_current) {
			best = i;
			best_current = gained;
		}
	}
	if (take && best >= 0)
		current[best & (DPP_ATSSS_MAX_PATHS - 1)] -= total;
	return best;
}

/* Active-standby: the first position (the session's priority order) that is up. */
static __always_inline int pick_active_standby(__u32 up)
{
	int i;

#pragma unroll
	for (i = 0; i < DPP_ATSSS_MAX_PATHS; i++)
		if (up & (1u << i))
			return i;
	return -1;
}

/* Priority-based: of the positions in `among`, the one of the highest priority (the smallest
 * number; the first of equals). */
static __always_inline int pick_priority(const struct dpp_atsss_session *s, __u32 among)
{
	int i, best = -1;

#pragma unroll
	for (i = 0; i < DPP_ATSSS_MAX_PATHS; i++) {
		if (!(among & (1u << i)))
			continue;
		if (best < 0 || s->priority[i] < s->priority[best & (DPP_ATSSS_MAX_PATHS - 1)])
			best = i;
	}
	return best;
}

/* The next MP_SEQ number of the session: one atomic add, unique and increasing across CPUs. Not a
 * block of numbers per CPU handed out locally: the numbers a CPU's block leaves unused are a gap
 * the UE's receiver, reordering by MP_SEQ, waits on until its timeout. This add and the path's
 * (atsss_send) cost some 10 ns together (bench/README.md, ATSSS). */
static __always_inline __u64 take_mp_seq(struct dpp_atsss_session *s)
{
	return __sync_fetch_and_add(&s->mp_seq, 1);
}

/* WEIGHTED's pick and its MP_SEQ number, under the lock that guards `current` (the session's, or
 * an MTS session's flow state's: nf/atsss/flows.h): the pick reads and writes every position's
 * current weight. The number, the session's, is taken there by atomic add too, as the other modes
 * take theirs without the lock: the control plane changes a session's mode in place (netapp/atsss/
 * table.py), so a packet that read the old mode may take a number as another mode's packet does. */
static __always_inline int pick_weighted_locked(struct dpp_atsss_session *s, struct bpf_spin_lock *lock,
						__s32 *current, __u32 up, __u64 *mp_seq)
{
	int pos;

	bpf_spin_lock(lock);
	pos = pick_weighted(s->weight, current, up, true);
	if (pos >= 0)
		*mp_seq = take_mp_seq(s);
	bpf_spin_unlock(lock);
	return pos;
}

/* The counters of the path p, the line of it a packet's count moves (atsss_count), read. Every
 * scheduler that encapsulates reads them before the MP_SEQ number is taken (or WEIGHTED's lock),
 * so that among many sessions their line is fetched while the path's first is: the atomic add
 * waits for the loads before it, and a load after it starts only once it is done, so counters
 * first read at the count (after both adds and the encapsulation) were a cold line at the end of
 * the packet's way (bench/README.md, "Round-robin's downlink by stage").
 * Volatile: read for their line, the count writes it. */
static __always_inline void atsss_warm_counters(const struct dpp_atsss_path *p)
{
	(void)*(volatile const __u64 *)&p->packets;
	(void)*(volatile const __u64 *)&p->bytes;
}

/* The session's path at position i, its counters read (atsss_warm_counters), or NULL. */
static __always_inline struct dpp_atsss_path *atsss_path_warm(const struct dpp_atsss_session *s, int i)
{
	__u32 slot = s->path[i & (DPP_ATSSS_MAX_PATHS - 1)];
	struct dpp_atsss_path *p = bpf_map_lookup_elem(&dpp_atsss_paths, &slot);

	if (p)
		atsss_warm_counters(p);
	return p;
}

/* WEIGHTED's pick (pick_weighted_locked, with `lock` and `current`) and its path (*path; NULL when
 * the pick is not the path guessed): the position the pick would be is read outside the lock, its
 * path's counters read with it (atsss_path_warm) before the lock is taken, and kept when the pick
 * under the lock is the same (it is not when another CPU picked in between; the send then looks its
 * own path up). */
static __always_inline int schedule_weighted(struct dpp_atsss_session *s, struct bpf_spin_lock *lock,
					     __s32 *current, __u32 up, __u64 *mp_seq, struct dpp_atsss_path **path)
{
	int guess = pick_weighted(s->weight, current, up, false), pos;
	struct dpp_atsss_path *warm = guess >= 0 ? atsss_path_warm(s, guess) : NULL;

	pos = pick_weighted_locked(s, lock, current, up, mp_seq);
	*path = pos == guess ? warm : NULL;
	return pos;
}

/* REDUNDANT: every position up, as the session's own mask says (struct dpp_atsss_session.up, which
 * the control plane keeps with the paths' flags): no path's line is read here, each copy reads its
 * own. Positions past n_paths are left out (a mask of a session whose paths are changing). */
static __always_inline int schedule_redundant(struct dpp_atsss_session *s, __u64 *mp_seq, __u32 *up,
					      struct dpp_atsss_path **path)
{
	__u32 n = s->n_paths;

	*path = NULL;
	*up = s->up & (n >= DPP_ATSSS_MAX_PATHS ? (1u << DPP_ATSSS_MAX_PATHS) - 1 : (1u << n) - 1);
	if (!*up)
		return -1;
	*mp_seq = take_mp_seq(s);
	return ATSSS_EVERY_PATH;
}

/* The position of the path for the next packet (ATSSS_EVERY_PATH: each of *up), its MP_SEQ number
 * (*mp_seq) and its path (*path, or NULL: looked up by the send), or -1 when no path of the
 * session is up (no number is then taken), in `mode` (the session's, or its flow's:
 * nf/atsss/flows.h) with the session's state; every mode but ROUND_ROBIN (schedule_round_robin). The path is picked before
 * the number is taken (WEIGHTED's guessed before its lock, schedule_weighted), so its counters are
 * read then (atsss_path_warm), with the paths' lines; REDUNDANT counts on each copy's own way. */
static __always_inline int atsss_schedule(struct dpp_atsss_session *s, __u8 mode, __u64 *mp_seq, __u32 *up,
					  struct dpp_atsss_path **path)
{
	struct atsss_paths_view v;
	int pos;

	/* marked unlikely, not because REDUNDANT is rare: without the hint the compiler tests it before
	 * ROUND_ROBIN in atsss_downlink and spills round-robin's registers around it (+6 instructions
	 * executed on round-robin's way, which shares none of this; bench/README.md's section on paths
	 * and sessions changed in place has the counts) */
	if (__builtin_expect(mode == DPP_ATSSS_REDUNDANT, 0))
		return schedule_redundant(s, mp_seq, up, path);
	/* two copies of the paths' read: the one of the schedulers that need no more than which
	 * paths are up keeps no RTT or congestion state across the loop (registers spilled) */
	if (mode == DPP_ATSSS_SMALLEST_DELAY || mode == DPP_ATSSS_PRIORITY)
		v = atsss_view_paths(s, true);
	else
		v = atsss_view_paths(s, false);

	*up = v.up;
	*path = NULL;
	if (!v.up)
		return -1;
	if (mode == DPP_ATSSS_WEIGHTED)
		return schedule_weighted(s, &s->lock, s->current, v.up, mp_seq, path);
	if (mode == DPP_ATSSS_ACTIVE_STANDBY)
		pos = pick_active_standby(v.up);
	else if (mode == DPP_ATSSS_SMALLEST_DELAY)
		pos = v.fastest;
	else if (mode == DPP_ATSSS_PRIORITY)
		pos = pick_priority(s, v.free ? v.free : v.up);
	else /* ROUND_ROBIN is schedule_round_robin's; no other mode is written */
		return -1;
	if (pos < 0)
		return -1;
	*path = atsss_path_warm(s, pos);
	*mp_seq = take_mp_seq(s);
	return pos;
}

/* Round-robin's path for the turn `turn` (its number taken) when it is not the turn the path `read`
 * (up, at position `read`) was read for: the path at its turn, or when that one is down, of the
 * positions up, the one its cycle falls on. */
static __always_inline struct dpp_atsss_path *round_robin_other(struct dpp_atsss_session *s, __u32 n, __u64 turn,
								 int read, struct dpp_atsss_path *up)
{
	int pos = round_robin_turn(n, turn);
	struct dpp_atsss_path *p = pos == read ? up : atsss_path_up(s, pos);
	struct atsss_paths_view v;

	if (!p) { /* its path is down: its cycle's turn among the paths up */
		v = atsss_view_paths(s, false);
		pos = v.up ? pick_round_robin(v.up, (__u32)turn / n) : read;
		p = atsss_path_up(s, pos);
		if (!p) /* gone down since: the path read up takes it */
			p = up;
	}
	return p;
}

/* Round-robin's own turns on a session with flow rules: the top bits of mp_seq, past the MP_SEQ
 * number's DPP_ATSSS_DCCP_SEQ_BITS, count the session's own round-robin packets alone (those of no
 * MTS session's flow state: schedule_round_robin_flow counts its own), so that they take their
 * turns whatever the UE's flows take numbers in between (interleaved 1:1 with an active-standby
 * flow, turns by MP_SEQ number would give them every other number: one path). One atomic add takes
 * both, its number and its turn. Without flow rules every packet of the session is round-robin's,
 * and its turn is its number (one add of 1, as before). The turns wrap at 2^16, a number's carry
 * past 2^48 moves them one on: a turn skipped, nothing else. */
#define ATSSS_TURN_SHIFT DPP_ATSSS_DCCP_SEQ_BITS
#define ATSSS_TURN_ONE (1ULL << ATSSS_TURN_SHIFT)

/* The turn a value of mp_seq is for: the number itself, or with own turns its top bits. */
static __always_inline __u64 round_robin_turn_of(__u64 mp_seq, const bool own_turns)
{
	return own_turns ? mp_seq >> ATSSS_TURN_SHIFT : mp_seq;
}

/* Round-robin: the path at the position the packet's turn falls on among the session's paths
 * (round_robin_turn of n_paths), when it is up; when it is down, of the positions up, the one the
 * turn's cycle falls on (pick_round_robin). The turn is taken from the word `counter` by an atomic
 * add of `add` (*taken: the value it held), and is that value, or with `own_turns` (a constant) its
 * top bits (ATSSS_TURN_SHIFT). With every path up, consecutive turns take the paths in turn on any
 * CPU, and a packet reads one path, not every one: before its turn is taken (an atomic add, which
 * waits for the loads before it), the path of the position the next turn falls on as read then,
 * which is the packet's own unless another CPU took a turn meanwhile (the value taken is then not
 * the value read: round_robin_other). That path being up is also what lets the turn be taken: none
 * is taken while no path is up. The path read has its counters read with it (atsss_warm_counters).
 * The picked path, or NULL when no path is up. A path marked down after it was read still gets this
 * one packet. */
static __always_inline struct dpp_atsss_path *round_robin_take(struct dpp_atsss_session *s, __u64 *counter,
								const __u64 add, const bool own_turns, __u64 *taken)
{
	__u32 n = s->n_paths;
	__u64 seen = *(volatile __u64 *)counter;
	int read = round_robin_turn(n, round_robin_turn_of(seen, own_turns));
	struct dpp_atsss_path *up = atsss_path_up(s, read);

	if (!up) { /* down: the first path up, if any */
#pragma unroll
		for (read = 0; read < DPP_ATSSS_MAX_PATHS; read++) {
			if (read >= s->n_paths)
				return NULL;
			up = atsss_path_up(s, read);
			if (up)
				break;
		}
		if (!up)
			return NULL;
		atsss_warm_counters(up);
		*taken = __sync_fetch_and_add(counter, add);
		return round_robin_other(s, n, round_robin_turn_of(*taken, own_turns), read, up);
	}
	atsss_warm_counters(up);
	*taken = __sync_fetch_and_add(counter, add);
	if (*taken == seen) /* the value read: the path read is its turn's */
		return up;
	return round_robin_other(s, n, round_robin_turn_of(*taken, own_turns), read, up);
}

/* Round-robin on the session's own turns (round_robin_take): its MP_SEQ number's word is the
 * counter, the turn its number, or with `own_turns` (a constant: the session has flow rules) the
 * count in its top bits, both taken by one atomic add (ATSSS_TURN_SHIFT); no number is taken while
 * no path is up (a number taken and not sent is a gap the UE's receiver waits on). */
static __always_inline struct dpp_atsss_path *schedule_round_robin(struct dpp_atsss_session *s, __u64 *mp_seq,
								    const bool own_turns)
{
	return round_robin_take(s, &s->mp_seq, own_turns ? ATSSS_TURN_ONE + 1 : 1, own_turns, mp_seq);
}

/* Round-robin for a flow of an MTS session with its own state `f` (nf/atsss/flows.h): its turn
 * from the state's counter, then its MP_SEQ number from the session's (the UE's one sequence, which
 * its receiver reorders by), by two atomic adds; none of either while no path is up. */
static __always_inline struct dpp_atsss_path *schedule_round_robin_flow(struct dpp_atsss_session *s,
									 struct dpp_atsss_flow_state *f, __u64 *mp_seq)
{
	struct dpp_atsss_path *p;
	__u64 turn;

	p = round_robin_take(s, &f->turns, 1, false, &turn);
	if (p)
		*mp_seq = take_mp_seq(s);
	return p;
}

#endif /* DPP_NF_ATSSS_SCHEDULE_H */
