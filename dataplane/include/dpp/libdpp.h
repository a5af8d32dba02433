/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* libdpp: load, attach, pin and drive the DPP XDP pipeline. Every function returns 0 or a negative
 * errno and never prints; messages go to the callback set with dpp_set_log(). */
#ifndef LIBDPP_H
#define LIBDPP_H

#include <stdbool.h>
#include <stddef.h>
#include "dpp_structs.h"
#include "nf/qos.h"
#include "nf/upf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DPP_PIN_ROOT "/sys/fs/bpf/dpp"

struct dpp; /* opaque handle on one loaded (or reopened) instance */

enum dpp_log_level {
	DPP_LOG_WARN = 0,
	DPP_LOG_INFO = 1,
	DPP_LOG_DEBUG = 2,
};

typedef void (*dpp_log_fn)(enum dpp_log_level level, const char *msg, void *ctx);

/* Route libdpp's (and libbpf's) messages; NULL silences them. Not thread-safe: call once at start. */
void dpp_set_log(dpp_log_fn fn, void *ctx);

/* A map's size, chosen when the instance is loaded (struct dpp_open_opts.map_sizes). */
struct dpp_map_size {
	const char *name;  /* the map's name in the BPF object */
	__u32 max_entries; /* at least 1 */
};

struct dpp_open_opts {
	size_t sz;		  /* sizeof(struct dpp_open_opts), for forward compatibility */
	const char *instance;	  /* name under DPP_PIN_ROOT; NULL: an anonymous, unpinned instance */
	__u32 max_rules;	  /* 0: DPP_MAX_RULES */
	__u32 max_flows;	  /* flow cache slots per CPU (rounded up to 2^n); 0: DPP_MAX_FLOWS */
	bool flow_cache;	  /* front the tuple-space search with the per-flow cache */
	bool trace;		  /* record every packet's outcome in dpp_trace (replay, tests) */
	__u32 default_verdict;	  /* enum dpp_verdict; written to dpp_config at first load */
	__u64 meter_window_ns;	  /* 0: 1 ms */
	/* Sizes of maps whose size is only a capacity (the PDR and URR tables of the UPF: the
	 * others are the program's, and refused with -EPERM; an unknown name with -ENOENT); a
	 * per-CPU map may take at most DPP_PERCPU_BYTES_MAX over the possible CPUs (-E2BIG). When
	 * the instance is reopened from its pins, the pinned maps' sizes stay: a different size
	 * asked for is reported (a warning), not applied. Unnamed maps keep their built-in size. */
	const struct dpp_map_size *map_sizes;
	__u32 nr_map_sizes;
};
/* The most memory one per-CPU map may take: entries x value (rounded up to 8) x possible CPUs. */
#define DPP_PERCPU_BYTES_MAX (4ULL << 30)
#define DPP_OPEN_OPTS_SZ (sizeof(struct dpp_open_opts))

/* 0 when the kernel of `release` (as `uname -r` prints it; NULL: the running one) is at least the
 * oldest the data path loads on (src/kernel.c says which and why); -EOPNOTSUPP, logged with the
 * reason, when it is older; -EINVAL when the release names no version. */
int dpp_kernel_check(const char *release);
/* dpp_kernel_check, then whether that kernel takes the data path with these settings
 * (dpp_open_opts.flow_cache and .trace): -EOPNOTSUPP, logged with the reason, for a kernel whose
 * verifier is known to give up on them together (6.2: src/kernel.c). */
int dpp_kernel_check_settings(const char *release, bool flow_cache, bool trace);
/* Open the instance: when opts->instance is pinned, reuse its pinned program, maps and links
 * (traffic is not interrupted); otherwise check the running kernel and the settings
 * (dpp_kernel_check_settings), load a fresh program and, if named, pin it. */
int dpp_open(const struct dpp_open_opts *opts, struct dpp **out);
/* Release the handle. Pinned objects (and so attached programs) stay in the kernel. */
void dpp_close(struct dpp *d);
/* Remove every pin of the instance (detaching its links). The handle stays usable until closed. */
int dpp_unpin(struct dpp *d);
/* 1 when opts->instance already existed when opened (maps were reused), else 0. */
int dpp_reused(const struct dpp *d);
/* The COARSE policers' clock word of the programs the handle runs (nf/qos/clock.h): the time its
 * timer last read, and the jiffies before it (0: never). -ENOENT: programs built without it. */
int dpp_clock_word_get(const struct dpp *d, struct dpp_clock_word *word);
/* Whether opening found the policers' clock timer stopped and started it (a reopen's only). */
bool dpp_clock_restarted(const struct dpp *d);
/* fd of the XDP entry, the program the links run (dpp_programs lists every program). */
int dpp_prog_fd(const struct dpp *d);
/* fd of a map by its name in the BPF object ("dpp_rules", ...), or -ENOENT. */
int dpp_map_fd(const struct dpp *d, const char *name);

/* What runs a program of the instance. */
enum dpp_prog_kind {
	DPP_PROG_KIND_XDP = 0,	/* the entry: the interfaces' XDP links run it */
	DPP_PROG_KIND_TAIL = 1, /* tail-called by the entry through its slot of dpp_progs */
	DPP_PROG_KIND_CPUMAP = 2, /* run by CPUMAP queues: the dispatcher's workers (dpp_rss_cpu_map) */
	DPP_PROG_KIND_DEVMAP = 3, /* egress programs of DEVMAP entries: FRER's, ATSSS's, DUPLICATE's */
};

struct dpp_prog_desc {
	char name[64]; /* its name in the BPF object; pinned as prog (the entry) or progs/<name> */
	__u32 id;      /* the kernel's program id */
	__u32 kind;    /* enum dpp_prog_kind */
	__s32 slot;    /* its slot of dpp_progs (enum dpp_prog); -1: the entry, or in no slot */
	int fd;	       /* the handle's: valid until dpp_close or dpp_upgrade */
};

/* The instance's programs, the entry first: fills up to max and returns how many there are. */
int dpp_programs(const struct dpp *d, struct dpp_prog_desc *out, int max);
/* The program `name` of the object this library carries, loaded alone into the instance, bound to
 * the instance's maps, when the instance has none of that name (it was pinned by an older build:
 * e.g. a writer of values in place that came later), and pinned with its programs; then listed by
 * dpp_programs. 0 when the instance has it, or now has it. -ENOENT: no program of that name that
 * this build loads alone (not warned); -EPROTO: a map of the instance it needs is laid out
 * otherwise: warned, naming the instance and what to do; another error: the kernel refused the
 * load this time (warned; asking again may succeed). */
int dpp_program_add(struct dpp *d, const char *name);

struct dpp_upgrade_opts {
	size_t sz;	 /* sizeof(struct dpp_upgrade_opts) */
	bool flow_cache; /* load-time options of the new program (see dpp_open_opts) */
	bool trace;
};
#define DPP_UPGRADE_OPTS_SZ (sizeof(struct dpp_upgrade_opts))

/* Replace the instance's programs with the ones this library carries (a NetApp upgrade, or new
 * load-time options), keeping its maps, so rules, counters and configuration carry over. The new
 * entry comes with its own dpp_progs, filled with the new tail-call targets when it is loaded;
 * each XDP link is then switched to the new entry in one step (bpf_link_update), so every packet
 * runs either the old programs or the new ones, never a mix and never none. The pins are replaced
 * last. Rule and flow table sizes stay those of the running instance. When any step before that
 * fails, the links are switched back and the running programs stay in place. opts NULL: flow
 * cache on, trace off. Adopted in place from an instance pinned by an earlier build: a map it
 * lacks (created and pinned), a struct member its map names reserved... that this build names
 * otherwise at the same offset and int size (dpp_config.functions, set before the links switch);
 * any other difference of a map's layout is -EPROTO: unpin the instance and load it again. */
int dpp_upgrade(struct dpp *d, const struct dpp_upgrade_opts *opts);

/* Attach to an interface with a bpf_link (pinned as links/<ifindex> when the instance is named).
 * -EOPNOTSUPP in native mode means the driver lacks XDP: try DPP_XDP_MODE_GENERIC. -EEXIST: the
 * interface already has an XDP program. */
int dpp_attach(struct dpp *d, int ifindex, enum dpp_xdp_mode mode);
int dpp_detach(struct dpp *d, int ifindex);
/* ifindexes this instance is attached to (from its links); returns the count or -errno. */
int dpp_attached(struct dpp *d, int *ifindexes, int max);

/* Rules: batched, each batch applied in order; on failure *done tells how many were applied. */
int dpp_rules_upsert(struct dpp *d, const struct dpp_flow_key *keys, const struct dpp_rule *rules,
		     __u32 n, __u32 *done);
int dpp_rules_delete(struct dpp *d, const struct dpp_flow_key *keys, __u32 n, __u32 *done);
/* Iterate installed rules; cb returning non-zero stops the walk (and is returned). */
typedef int (*dpp_rule_cb)(const struct dpp_flow_key *key, const struct dpp_rule *rule, void *ctx);
int dpp_rules_foreach(struct dpp *d, dpp_rule_cb cb, void *ctx);
/* Publish a new shape set: written to the inactive slot, then made active, then the generation is
 * bumped so cached flows are classified again. Install rules of new shapes before publishing. */
int dpp_shapes_publish(struct dpp *d, const struct dpp_shape *shapes, __u32 n);
int dpp_shapes_get(struct dpp *d, struct dpp_shape_set *out);

int dpp_config_get(struct dpp *d, struct dpp_config *out);
/* Write the config but for the fields libdpp keeps, which the caller's read may have outdated:
 * shape_set and generation (dpp_shapes_publish's) and functions (the functions' word). */
int dpp_config_set(struct dpp *d, const struct dpp_config *cfg);

/* CPU set: add (CPUMAP entry with queue_size, 0 = 2048) or remove a CPU, set capacity (0 =
 * unmetered) and the control plane's overload flag. */
int dpp_cpu_enable(struct dpp *d, __u32 cpu, __u32 queue_size, __u64 capacity_pps);
int dpp_cpu_disable(struct dpp *d, __u32 cpu);
int dpp_cpu_set_overloaded(struct dpp *d, __u32 cpu, bool overloaded);
int dpp_cpu_get(struct dpp *d, __u32 cpu, struct dpp_cpu *out);
/* The largest CPUMAP queue_size the running kernel takes (it refuses larger ones with -EOVERFLOW),
 * found by trying a throwaway CPUMAP; no instance needed. Needs the rights of dpp_open. */
int dpp_cpumap_qsize_max(__u32 *out);

/* Generic tables: the plain maps of the object (egress ports, alternative groups, a function's
 * own tables), by name, n elements at a time. key_size and value_size are the sizes of one key and
 * one value in the caller's arrays and must be the map's (a per-CPU value is the map's value size
 * rounded up to 8, times the possible CPUs): -EINVAL otherwise. -ENOENT: no map of that name.
 * Maps with a protocol to their writes (rules, shapes, config, CPUs, counters, and the tail-call
 * slots of dpp_progs, which dpp_upgrade switches) are read here but written only through their own
 * calls: update and delete refuse them with -EPERM. */
/* flags: BPF_ANY, BPF_NOEXIST or BPF_EXIST; applied in order, batched where the map type allows;
 * on failure *done tells how many were applied. */
int dpp_table_update(struct dpp *d, const char *name, const void *keys, size_t key_size,
		     const void *values, size_t value_size, __u32 n, __u64 flags, __u32 *done);
/* One value written at n indexes of an array whose key is a __u32, in each of `rows` rows of
 * `stride` slots (a map with a row per CPU: slot r * stride + index), as one batch (BPF_ANY):
 * what dpp_table_update does with n * rows keys and values, without the caller making them. Row 0's
 * slots are written first, each row's in the indexes' order; *done counts the slots written.
 * -ERANGE: an index at or past `stride`. */
int dpp_table_fill(struct dpp *d, const char *name, const __u32 *indexes, __u32 n, __u32 stride,
		   __u32 rows, const void *value, size_t value_size, __u32 *done);
/* values[i] of keys[i]; found[i] (may be NULL) is 1 when the key is in the map, else 0 and
 * values[i] is zeroed. Returns how many keys were found. */
int dpp_table_lookup(struct dpp *d, const char *name, const void *keys, size_t key_size,
		     void *values, size_t value_size, __u32 n, __u8 *found);
/* The index of the first of n keys the map holds, with the bits `flag` set in the byte at flag_at
 * of its value (flag 0: held at all; an array holds every key), or n when none is: a guard's
 * question before entries are added (dpp_table_lookup's lookups, the values not handed back).
 * -EOVERFLOW when n values and their n found bytes would not fit in a size_t. */
int dpp_table_held(struct dpp *d, const char *name, const void *keys, size_t key_size,
		   size_t value_size, __u32 n, __u32 flag_at, __u8 flag);
int dpp_table_delete(struct dpp *d, const char *name, const void *keys, size_t key_size, __u32 n,
		     __u32 *done);

#define DPP_TABLE_TOKEN_MAX 512 /* the kernel's largest hash key */
/* Where a dump stands: zeroed before its first call, then libdpp's own. */
struct dpp_table_cursor {
	__u32 state;
	__u32 reserved;
	__u8 token[DPP_TABLE_TOKEN_MAX];
};
/* The next at most n entries into keys and values; returns how many, 0 once the dump is over.
 * An array's dump holds every index. */
int dpp_table_dump(struct dpp *d, const char *name, struct dpp_table_cursor *cursor, void *keys,
		   size_t key_size, void *values, size_t value_size, __u32 n);
/* A map of maps' entry `index` (of the map `name`) given a new inner map of `inner_type` and
 * `max_entries` (its template's: the kernel refuses another) holding the n pairs of keys and values,
 * put in with one write: a program that looks the entry up finds the old inner map or the new one,
 * never one half written. Where the entry should lead nowhere, delete it (dpp_table_delete). */
int dpp_table_inner_set(struct dpp *d, const char *name, __u32 index, __u32 inner_type,
			__u32 max_entries, const void *keys, size_t key_size, const void *values,
			size_t value_size, __u32 n);
/* dpp_table_lookup of the inner map at `index` of the map of maps `name`; -ENOENT when the entry
 * leads to no map. */
int dpp_table_inner_lookup(struct dpp *d, const char *name, __u32 index, const void *keys,
			   size_t key_size, void *values, size_t value_size, __u32 n, __u8 *found);
/* Returns once every run of the programs that began before the call has ended (an RCU grace period,
 * some milliseconds): a table value that a run may have been reading can then be rewritten for
 * another key (netapp/upf/ways.py reuses the ways of dpp_upf_dl4 so). */
int dpp_table_wait_readers(struct dpp *d);

/* Counters summed over CPUs. Rule counters for slots [first, first + n). */
int dpp_stats_rules(struct dpp *d, __u32 first, __u32 n, struct dpp_counter *out);
int dpp_stats_verdicts(struct dpp *d, struct dpp_counter out[DPP_VERDICT_MAX]);
int dpp_stats_actions(struct dpp *d, struct dpp_counter out[DPP_ACTION_MAX]);
int dpp_stats_reasons(struct dpp *d, struct dpp_counter out[DPP_REASON_MAX]);
/* What STEER handed to CPUs [0, n) (n <= DPP_MAX_CPUS, else -ERANGE): packets the CPUMAP took,
 * not those an overloaded CPU sent to alternatives. */
int dpp_stats_cpus(struct dpp *d, struct dpp_counter *out, __u32 n);
/* Zero the counters of rule slots [first, first + n) (a freed slot is reused by a new rule). */
int dpp_stats_rules_clear(struct dpp *d, __u32 first, __u32 n);

/* Run one packet through the loaded program (BPF_PROG_TEST_RUN). out may be NULL; *out_len is
 * in: capacity, out: length. ingress_ifindex 0: none. trace is filled when the instance was
 * opened with trace on (else -ENOTSUP is not returned: trace is left zeroed). */
struct dpp_test_result {
	__u32 verdict;	/* enum dpp_verdict */
	__u32 duration_ns;
	struct dpp_trace trace;
};
int dpp_test_run(struct dpp *d, const void *pkt, __u32 len, __u32 ingress_ifindex, void *out,
		 __u32 *out_len, struct dpp_test_result *res);

/* The UPF (bpf/nf/upf/): frames its data path handed to user space (the ring dpp_upf_punt: FAR
 * BUFF and DUPL), each handed to cb as it is read; cb returning non-zero stops the poll (and is
 * returned). One reader per instance. */
struct dpp_upf_punts;
typedef int (*dpp_upf_punt_cb)(const struct dpp_upf_punt *rec, void *ctx);
int dpp_upf_punts_open(struct dpp *d, dpp_upf_punt_cb cb, void *ctx, struct dpp_upf_punts **out);
/* Wait up to timeout_ms (-1: forever) for records and hand them over: how many, or -errno
 * (interrupted by a signal: 0). */
int dpp_upf_punts_poll(struct dpp_upf_punts *p, int timeout_ms);
/* An fd that polls readable when records wait (to wait without consuming, then poll with 0), or
 * -errno. Records are consumed by one thread at a time: the caller's to ensure. */
int dpp_upf_punts_fd(const struct dpp_upf_punts *p);
/* *out: the records too short for the length they carry (never handed over). */
int dpp_upf_punts_malformed(const struct dpp_upf_punts *p, __u64 *out);
void dpp_upf_punts_close(struct dpp_upf_punts *p);
/* Send a frame through the program as if it had arrived on ifindex, its verdict carried out (XDP_TX
 * and XDP_REDIRECT send it, XDP_PASS gives it to the kernel): BPF_PROG_TEST_RUN with live frames. */
int dpp_upf_replay(struct dpp *d, const void *frame, __u32 len, __u32 ifindex);
/* The buckets of dpp_upf_dl4 of n downlink keys: instances[i], families[i] (4 or 6) and addrs's
 * 16 bytes at i * 16 (an IPv4 address in the first 4, network order). buckets[i]: the bucket of a
 * table of 1 << bits buckets (bpf: dl4_bucket), or DPP_UPF_DL4_HASHED where the table cannot hold
 * the key (IPv6, an instance at or past 1 << bits, bits 0). -EINVAL: bits past 30. */
int dpp_upf_dl4_buckets(const __u32 *instances, const __u8 *families, const void *addrs, __u32 n,
			__u32 bits, __s32 *buckets);
/* The ways of n entries in order, from entry `from` (ways[] of those before it as an earlier call
 * left them): entry i takes the first way of bucket buckets[i] that is clean in state (a byte a
 * slot: DPP_UPF_DL4_PUBLISHED, RETIRED, STRAY, TAKEN bits; clean when 0), marked TAKEN meanwhile;
 * ways[i] = DPP_UPF_DL4_HASHED when its bucket is, or has no clean way; = DPP_UPF_DL4_STAYS when
 * its bucket is. Returns n once every entry has its way (the TAKEN marks cleared), or, when
 * may_wait, the first entry whose bucket has no clean way but a RETIRED one (the marks kept): the
 * caller waits for the programs' runs, clears the RETIRED bits and calls again from it.
 * -ERANGE: a bucket's ways past `slots`. */
int dpp_upf_dl4_place(const __s32 *buckets, __u32 n, __u8 *state, __u32 slots, __u32 from,
		      int may_wait, __s32 *ways);

/* Words of a BPF_F_MMAPABLE array's values written in place, through the caller's mapping of it
 * (mmap of the map's fd), while programs read them: a word is `width` bytes (1, 2, 4 or 8) at
 * `offset` from the mapping's start, a multiple of its width, and `value` holds it in its low
 * bytes. No instance: the mapping is the caller's. */
struct dpp_word {
	__u64 offset;
	__u64 value;
	__u32 width;
	__u32 reserved; /* 0 */
};
/* The n words stored in their order into the `size` bytes at `base`, each by one aligned atomic
 * store of release order (__atomic_store_n, __ATOMIC_RELEASE): a program on another CPU reads a
 * word whole, old or new, and one that sees a word new (by an acquire load) sees every word before
 * it new, on any architecture (a plain store gives neither: the compiler may split or reorder it).
 * Checked before any is stored: -EINVAL (base or words NULL, a width not 1, 2, 4 or 8, an offset
 * not a multiple of its width, reserved set), -ERANGE (a word past size). Returns n. */
int dpp_words_store(void *base, size_t size, const struct dpp_word *words, __u32 n);

#ifdef __cplusplus
}
#endif
#endif /* LIBDPP_H */
