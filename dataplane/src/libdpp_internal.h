/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* libdpp internal: the handle, the ids and specs of the maps libdpp uses, logging, and what the
 * modules share. One module per concern:
 *   libdpp.c  open, close and unpin an instance     pins.c     bpffs and the instance's pins
 *   progs.c   the instance's programs
 *   maps.c    the instance's maps, checked and sized batch.c    batched map writes
 *   links.c   attach and detach (XDP links)         rules.c    rules
 *   shapes.c  shapes, config and shape filters      cpus.c     the CPU set
 *   tables.c  plain maps by name (generic tables)   stats.c    counters
 *   testrun.c BPF_PROG_TEST_RUN                     upgrade.c  program upgrade
 *   log.c     messages                              filters.c  the shape filters' bits (filters.h)
 *   upf.c     the UPF's punted frames and replays  btf_compare.c a pinned map's value layout
 *   words.c   words of a mapped array stored in place   kernel.c  the oldest kernel it loads on
 *   clock.c   the policers' clock timer
 * A module that uses maps declares their specs (a `<module>_maps` list) and maps.c checks them;
 * a declared map is written through its module's calls only, never as a generic table.
 * Nothing here is exported: libdpp.map exports dpp_* only, so no internal name starts with it. */
#ifndef LIBDPP_INTERNAL_H
#define LIBDPP_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <linux/bpf.h>
#include <bpf/libbpf.h>

#include "dpp/libdpp.h"
#include "filters.h"

#define DPP_INSTANCE_NAME_MAX 32
#define DPP_MAP_NAME_MAX 64
#define DPP_MAPS_MAX 96
#define DPP_PROGS_MAX 16
/* Elements per batch syscall: bounds the kernel's time under one call and our buffer sizes. */
#define DPP_BATCH_CHUNK 8192

/* The maps libdpp itself reads and writes; each module's <module>_maps gives their layout. */
enum dpp_map_id {
	DPP_MAP_RULES,
	DPP_MAP_SHAPES,
	DPP_MAP_CONFIG,
	DPP_MAP_FLOWS,
	DPP_MAP_CPUS,
	DPP_MAP_CPU_METERS,
	DPP_MAP_CPU_MAP,
	DPP_MAP_RULE_STATS,
	DPP_MAP_VERDICTS,
	DPP_MAP_ACTIONS,
	DPP_MAP_REASONS,
	DPP_MAP_CPU_STATS,
	DPP_MAP_TRACE,
	DPP_MAP_FILTERS,
	DPP_MAP_UPF_PUNT,
	DPP_MAP_NR,
};

struct dpp;

/* The layout libdpp expects of a map; a list of them ends with an entry whose name is NULL. */
struct dpp_map_spec {
	enum dpp_map_id id;
	const char *name;
	__u32 type;
	__u32 key_size;
	__u32 value_size;
	/* NULL, or whether max_entries fits what the program assumes; entries_rule says what not */
	bool (*entries_valid)(const struct dpp *d, __u32 max_entries);
	const char *entries_rule;
};

#define DPP_MAP_SPEC(i, n, t, k, v)                                                                \
	{ .id = (i), .name = (n), .type = (t), .key_size = sizeof(k), .value_size = sizeof(v) }
#define DPP_ARRAY_SPEC(i, n, t, v) DPP_MAP_SPEC(i, n, t, __u32, v)

extern const struct dpp_map_spec instance_maps[], rules_maps[], shapes_maps[], cpus_maps[],
	stats_maps[], testrun_maps[], upf_maps[];

enum dpp_map_lock {
	DPP_MAP_LOCK_UNKNOWN = 0,
	DPP_MAP_LOCK_NONE,
	DPP_MAP_LOCK_SPIN, /* its values hold a bpf_spin_lock: read and written under it (BPF_F_LOCK) */
};

struct dpp_map_ref {
	char name[DPP_MAP_NAME_MAX];
	int fd; /* owned */
	__u32 max_entries;
	enum dpp_map_lock lock; /* learnt at the first table call that needs it (tables.c) */
	/* type and sizes, read from the kernel at the first table call (tables.c): they never change
	 * for the fd's life, and a call per write cost a syscall per batch */
	bool info_known;
	__u32 type;
	__u32 key_size;
	__u32 value_size;
};

/* The instance's programs: [0] is the XDP entry, the others the programs it tail-calls. */
struct dpp_prog_table {
	int nr;
	struct dpp_prog_desc progs[DPP_PROGS_MAX]; /* fds owned */
};

struct dpp_link_ref {
	int ifindex;
	int fd; /* owned */
};

struct dpp {
	struct dpp_bpf *skel; /* the loaded object; NULL when reopened from pins */
	struct dpp_prog_table progs; /* fds owned: dups when loaded, so both paths close alike */
	int retired_slots_fd; /* the dpp_progs an upgrade replaced, for frames still in it; or -1 */
	bool reused;
	bool clock_restarted; /* the reopen found the policers' clock timer stopped and started it */
	char instance[DPP_INSTANCE_NAME_MAX + 1]; /* "" when anonymous */
	char pin_dir[PATH_MAX];			   /* "" when nothing is (or stays) pinned */
	int ncpus;				   /* possible CPUs: per-CPU value count */
	int nr_maps;
	struct dpp_map_ref maps[DPP_MAPS_MAX]; /* every map of the object, by name */
	struct dpp_map_ref *known[DPP_MAP_NR]; /* the ones libdpp uses, validated */
	int nr_links;
	int cap_links;
	struct dpp_link_ref *links;
	struct dpp_filters *filters; /* NULL: shapes are published without filters */
	bool filters_counted;	     /* the counts hold every rule (filters_ready) */
	pthread_mutex_t config_lock; /* held by every read-modify-write of dpp_config (shapes.c) */
	int config_lock_fd;	     /* the pin directory's, flocked while config_lock is held */
};

/* log.c */
__attribute__((format(printf, 2, 3)))
void libdpp_log(enum dpp_log_level level, const char *fmt, ...);
#define pr_warn(...) libdpp_log(DPP_LOG_WARN, __VA_ARGS__)
#define pr_info(...) libdpp_log(DPP_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) libdpp_log(DPP_LOG_DEBUG, __VA_ARGS__)
void log_hook_libbpf(void);
const char *ifname_of(int ifindex, char buf[IF_NAMESIZE + 16]);

/* libdpp.c */
int opts_copy(const void *in, void *out, size_t out_sz);

/* pins.c */
__attribute__((format(printf, 3, 4)))
int path_fmt(char *buf, size_t sz, const char *fmt, ...);
int pin_path(const struct dpp *d, char *buf, size_t sz, const char *sub, const char *leaf);
int pin_open(const char *dir, const char *name, const char *what);
int unlink_quiet(const char *path);
int instance_pinned(struct dpp *d, char *prog_path, size_t sz);
int pins_create(struct dpp *d);
int pin_dir_make(const struct dpp *d, const char *sub);
int pins_unstage(const struct dpp *d);
int pins_clear(struct dpp *d);
void pin_dirs_remove(struct dpp *d);

/* progs.c */
#define DPP_ENTRY_PROG "dpp_xdp"
/* The program of the GTP-U dispatcher's CPUMAP queues (bpf/nf/qos/rss.h). */
#define DPP_CPUMAP_PROG "dpp_rss_worker"
/* The program of FRER's member ports that name a VLAN id, in dpp_frer_tx's groups
 * (bpf/nf/frer/replicate.h), and the prefix of those of ATSSS's, dpp_atsss_tx
 * (bpf/nf/atsss/copies.h). */
#define DPP_DEVMAP_PROG "dpp_frer_egress"
#define DPP_DEVMAP_PROG_PREFIX "dpp_atsss_copy_"
/* The program of DUPLICATE's ports that decapsulate their copies (bpf/nf/duplicate/duplicate.h). */
#define DPP_DUP_DEVMAP_PROG "dpp_dup_decap"
#define DPP_SLOTS_MAP "dpp_progs"
int progs_collect_loaded(struct dpp_prog_table *t, struct bpf_object *obj, int slots_fd);
int progs_collect_pinned(struct dpp *d);
int progs_pin(const struct dpp *d, const struct dpp_prog_table *t, const char *sub);
int progs_adopt(struct dpp_prog_table *t, const char *name, int fd);
void progs_close(struct dpp_prog_table *t);

/* clock.c: the map of the policers' clock timer, never written as a table (tables.c) */
#define DPP_CLOCK_MAP "dpp_clock"
void clock_start(struct dpp *d, bool keep);

static inline int entry_fd(const struct dpp *d)
{
	return d->progs.nr ? d->progs.progs[0].fd : -1;
}

/* maps.c */
int map_add(struct dpp *d, const char *name, int fd);
struct dpp_map_ref *map_find(const struct dpp *d, const char *name);
bool map_declared(const char *name);
int maps_collect_loaded(struct dpp *d);
int maps_collect_pinned(struct dpp *d);
int maps_check(struct dpp *d);
int maps_size(struct dpp *d, struct bpf_object *obj, const struct dpp_map_size *sizes, __u32 n);
int maps_sizes_compare(struct dpp *d, const struct dpp_map_size *sizes, __u32 n);
int map_size_adopt(struct bpf_map *map, int fd);
int maps_check_btf(struct dpp *d);
int map_info_get(const char *name, int fd, struct bpf_map_info *info);
int skel_open(struct dpp_bpf **out);
int policer_rows_size(struct dpp *d, struct dpp_bpf *s);

/* btf_compare.c: the kernel BTF last loaded, by id (the maps of one load share theirs) */
struct dpp_btf_cache {
	__u32 id;
	struct btf *btf;
};
#define DPP_BTF_WHY_MAX 256
int map_btf_differs(const struct bpf_map *map, const struct btf *new_btf,
		    const struct bpf_map_info *info, struct dpp_btf_cache *cache, char *why,
		    size_t why_len);
void btf_cache_free(struct dpp_btf_cache *cache);

/* kernel.c: say what a load's -E2BIG means (a verifier that gave up), with the settings loaded */
void kernel_load_refusal_explain(int err, bool flow_cache, bool trace);
int lookup_u32(const struct dpp *d, enum dpp_map_id id, __u32 key, void *value);
int update_u32(const struct dpp *d, enum dpp_map_id id, __u32 key, const void *value);

static inline int map_fd(const struct dpp *d, enum dpp_map_id id)
{
	return d->known[id]->fd;
}

/* batch.c */
bool batch_unsupported(int err);
__u32 batch_progress(int err, __u32 requested, __u32 reported);
int batch_apply(int fd, const void *keys, size_t ksz, const void *vals, size_t vsz, __u32 n,
		__u64 flags, __u32 *done);

/* links.c */
int link_live(int fd);
int links_scan(struct dpp *d);
int links_drop_all(struct dpp *d);

/* shapes.c */
int config_read(struct dpp *d, struct dpp_config *cfg);
__u32 generation_next(__u32 gen);
void filters_init(struct dpp *d);
int filters_ready(struct dpp *d);
void config_lock(struct dpp *d);
void config_unlock(struct dpp *d);

/* functions.c */
int functions_refresh(struct dpp *d);
bool functions_map(const char *name);

/* cpus.c */
int cpus_rebudget(struct dpp *d, __u64 window_ns);

/* stats.c */
__u32 rule_slots(const struct dpp *d);

#endif /* LIBDPP_INTERNAL_H */
