// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* libdpp: loads the DPP pipeline from its skeleton (or reopens it from its bpffs pins), attaches
 * it with XDP links and drives its maps. Returns 0 or a negative errno; never prints. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dpp/libdpp.h"
#include "dpp.skel.h"
#include "filters.h"

/* Where bpffs must be mounted for DPP_PIN_ROOT to be a bpffs path. */
#define DPP_BPFFS_MOUNT "/sys/fs/bpf"
#define DPP_INSTANCE_NAME_MAX 32
#define DPP_MAP_NAME_MAX 64
#define DPP_MAPS_MAX 32
/* Elements per batch syscall: bounds the kernel's time under one call and our buffer sizes. */
#define DPP_BATCH_CHUNK 8192
#define DPP_DEFAULT_QSIZE 2048
/* The kernel's CPUMAP queue limit since Linux 4.15 (cpu_map_update_elem), and the most a probe of
 * another kernel's limit tries. */
#define DPP_KNOWN_QSIZE_MAX 16384
#define DPP_PROBE_QSIZE_MAX (1U << 20)
#define DPP_DEFAULT_WINDOW_NS 1000000ULL
#define DPP_NSEC_PER_SEC 1000000000ULL
/* The kernel's internal ENOTSUPP leaks to userspace from batch ops on maps that lack them. */
#define DPP_ENOTSUPP 524

/* Per-CPU values sit at 8-byte strides; summing them relies on dpp_counter needing no padding. */
_Static_assert(sizeof(struct dpp_counter) % 8 == 0, "per-CPU counter stride");

/* The maps libdpp itself reads and writes, and the layout it expects of them. */
enum dpp_map_id {
	DPP_MAP_RULES,
	DPP_MAP_SHAPES,
	DPP_MAP_CONFIG,
	DPP_MAP_FLOWS,
	DPP_MAP_CPUS,
	DPP_MAP_CPU_METERS,
	DPP_MAP_CPU_MAP,
	DPP_MAP_PORTS,
	DPP_MAP_ALT_GROUPS,
	DPP_MAP_RULE_STATS,
	DPP_MAP_VERDICTS,
	DPP_MAP_ACTIONS,
	DPP_MAP_REASONS,
	DPP_MAP_CPU_STATS,
	DPP_MAP_TRACE,
	DPP_MAP_FILTERS,
	DPP_MAP_NR,
};

struct dpp_map_spec {
	const char *name;
	__u32 type;
	__u32 key_size;
	__u32 value_size;
};

#define DPP_ARRAY_SPEC(n, t, v) { n, t, sizeof(__u32), sizeof(v) }

static const struct dpp_map_spec dpp_map_specs[DPP_MAP_NR] = {
	[DPP_MAP_RULES] = { "dpp_rules", BPF_MAP_TYPE_HASH, sizeof(struct dpp_flow_key),
			    sizeof(struct dpp_rule) },
	[DPP_MAP_SHAPES] = DPP_ARRAY_SPEC("dpp_shapes", BPF_MAP_TYPE_ARRAY, struct dpp_shape_set),
	[DPP_MAP_CONFIG] = DPP_ARRAY_SPEC("dpp_config", BPF_MAP_TYPE_ARRAY, struct dpp_config),
	[DPP_MAP_FLOWS] = DPP_ARRAY_SPEC("dpp_flows", BPF_MAP_TYPE_ARRAY,
					 struct dpp_flow_entry),
	[DPP_MAP_CPUS] = DPP_ARRAY_SPEC("dpp_cpus", BPF_MAP_TYPE_ARRAY, struct dpp_cpu),
	[DPP_MAP_CPU_METERS] = DPP_ARRAY_SPEC("dpp_cpu_meters", BPF_MAP_TYPE_ARRAY,
					      struct dpp_cpu_meter),
	[DPP_MAP_CPU_MAP] = DPP_ARRAY_SPEC("dpp_cpu_map", BPF_MAP_TYPE_CPUMAP,
					   struct bpf_cpumap_val),
	[DPP_MAP_PORTS] = DPP_ARRAY_SPEC("dpp_ports", BPF_MAP_TYPE_DEVMAP_HASH,
					 struct bpf_devmap_val),
	[DPP_MAP_ALT_GROUPS] = DPP_ARRAY_SPEC("dpp_alt_groups", BPF_MAP_TYPE_ARRAY,
					      struct dpp_alt_group),
	[DPP_MAP_RULE_STATS] = DPP_ARRAY_SPEC("dpp_rule_stats", BPF_MAP_TYPE_ARRAY,
					      struct dpp_counter),
	[DPP_MAP_VERDICTS] = DPP_ARRAY_SPEC("dpp_verdicts", BPF_MAP_TYPE_PERCPU_ARRAY,
					    struct dpp_counter),
	[DPP_MAP_ACTIONS] = DPP_ARRAY_SPEC("dpp_actions", BPF_MAP_TYPE_PERCPU_ARRAY,
					   struct dpp_counter),
	[DPP_MAP_REASONS] = DPP_ARRAY_SPEC("dpp_reasons", BPF_MAP_TYPE_PERCPU_ARRAY,
					   struct dpp_counter),
	[DPP_MAP_CPU_STATS] = DPP_ARRAY_SPEC("dpp_cpu_stats", BPF_MAP_TYPE_PERCPU_ARRAY,
					     struct dpp_counter),
	[DPP_MAP_TRACE] = DPP_ARRAY_SPEC("dpp_trace", BPF_MAP_TYPE_ARRAY, struct dpp_trace),
	[DPP_MAP_FILTERS] = DPP_ARRAY_SPEC("dpp_filters", BPF_MAP_TYPE_ARRAY, __u64),
};

struct dpp_map_ref {
	char name[DPP_MAP_NAME_MAX];
	int fd; /* owned */
	__u32 max_entries;
};

struct dpp_link_ref {
	int ifindex;
	int fd; /* owned */
};

struct dpp {
	struct dpp_bpf *skel; /* the loaded object; NULL when reopened from pins */
	int prog_fd;	       /* owned: a dup when loaded, so both paths close the same way */
	bool reused;
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
};

/* ---- logging ---- */

static dpp_log_fn log_fn;
static void *log_ctx;
static bool log_hooked;

static void log_emit(enum dpp_log_level level, const char *fmt, va_list ap)
{
	char small[512], *msg = small, *big = NULL;
	va_list again;
	size_t len;
	int n;

	va_copy(again, ap);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	/* libbpf dumps whole verifier logs in one message: do not cut them at the stack buffer. */
	if (n >= (int)sizeof(small)) {
		big = malloc((size_t)n + 1);
		if (big) {
			vsnprintf(big, (size_t)n + 1, fmt, again);
			msg = big;
		}
	}
	va_end(again);
	if (n < 0)
		return;
	len = strlen(msg);
	while (len && msg[len - 1] == '\n')
		msg[--len] = '\0';
	log_fn(level, msg, log_ctx);
	free(big);
}

__attribute__((format(printf, 2, 3)))
static void dpp_log(enum dpp_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	log_emit(level, fmt, ap);
	va_end(ap);
}

#define pr_warn(...) dpp_log(DPP_LOG_WARN, __VA_ARGS__)
#define pr_info(...) dpp_log(DPP_LOG_INFO, __VA_ARGS__)
#define pr_debug(...) dpp_log(DPP_LOG_DEBUG, __VA_ARGS__)

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum dpp_log_level l = DPP_LOG_DEBUG;

	if (!log_fn)
		return 0;
	if (level == LIBBPF_WARN)
		l = DPP_LOG_WARN;
	else if (level == LIBBPF_INFO)
		l = DPP_LOG_INFO;
	log_emit(l, fmt, ap);
	return 0;
}

/* libbpf prints to stderr until told otherwise; libdpp must not print at all. */
static void log_hook_libbpf(void)
{
	if (log_hooked)
		return;
	libbpf_set_print(libbpf_print);
	log_hooked = true;
}

void dpp_set_log(dpp_log_fn fn, void *ctx)
{
	log_fn = fn;
	log_ctx = ctx;
	log_hook_libbpf();
}

/* ---- small helpers ---- */

__attribute__((format(printf, 3, 4)))
static int path_fmt(char *buf, size_t sz, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sz, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sz)
		return -ENAMETOOLONG;
	return 0;
}

/* Interface name for messages; falls back to the index (e.g. in another network namespace). */
static const char *ifname_of(int ifindex, char buf[IF_NAMESIZE + 16])
{
	char name[IF_NAMESIZE];

	if (if_indextoname((unsigned int)ifindex, name))
		snprintf(buf, IF_NAMESIZE + 16, "%s", name);
	else
		snprintf(buf, IF_NAMESIZE + 16, "ifindex %d", ifindex);
	return buf;
}

static bool batch_unsupported(int err)
{
	return err == -EINVAL || err == -DPP_ENOTSUPP || err == -EOPNOTSUPP;
}

static int map_fd(const struct dpp *d, enum dpp_map_id id)
{
	return d->known[id]->fd;
}

static int lookup_u32(const struct dpp *d, enum dpp_map_id id, __u32 key, void *value)
{
	int err = bpf_map_lookup_elem(map_fd(d, id), &key, value);

	if (err)
		pr_warn("read %s[%u]: %s", dpp_map_specs[id].name, key, strerror(-err));
	return err;
}

static int update_u32(const struct dpp *d, enum dpp_map_id id, __u32 key, const void *value)
{
	int err = bpf_map_update_elem(map_fd(d, id), &key, value, BPF_ANY);

	if (err)
		pr_warn("write %s[%u]: %s", dpp_map_specs[id].name, key, strerror(-err));
	return err;
}

/* ---- pins and bpffs ---- */

static bool instance_name_valid(const char *name)
{
	size_t i, len = strlen(name);

	if (len < 1 || len > DPP_INSTANCE_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static int bpffs_ensure(void)
{
	struct statfs st;
	int err;

	if (statfs(DPP_BPFFS_MOUNT, &st)) {
		err = -errno;
		pr_warn("stat %s: %s", DPP_BPFFS_MOUNT, strerror(-err));
		return err;
	}
	if (st.f_type == BPF_FS_MAGIC)
		return 0;
	if (mount("bpf", DPP_BPFFS_MOUNT, "bpf", 0, "mode=0700")) {
		err = -errno;
		pr_warn("mount bpffs at %s: %s", DPP_BPFFS_MOUNT, strerror(-err));
		return err;
	}
	/* Each bpffs mount is a new, empty filesystem that dies with its mount namespace: pins made
	 * under a private /sys (as `ip netns exec` sets up) vanish, with the links, at exit. */
	pr_warn("bpffs was not mounted at %s: mounted it; pins last only as long as this "
		"mount namespace", DPP_BPFFS_MOUNT);
	return 0;
}

static int mkdir_one(const char *path)
{
	int err;

	if (!mkdir(path, 0700) || errno == EEXIST)
		return 0;
	err = -errno;
	pr_warn("mkdir %s: %s", path, strerror(-err));
	return err;
}

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	char *p;
	int err;

	err = path_fmt(buf, sizeof(buf), "%s", path);
	if (err)
		return err;
	for (p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		err = mkdir_one(buf);
		*p = '/';
		if (err)
			return err;
	}
	return mkdir_one(buf);
}

/* 1 if path exists, 0 if not, else -errno. */
static int path_exists(const char *path)
{
	struct stat st;
	int err;

	if (!stat(path, &st))
		return 1;
	err = -errno;
	if (err == -ENOENT)
		return 0;
	pr_warn("stat %s: %s", path, strerror(-err));
	return err;
}

static int pin_path(const struct dpp *d, char *buf, size_t sz, const char *sub, const char *leaf)
{
	if (leaf)
		return path_fmt(buf, sz, "%s/%s/%s", d->pin_dir, sub, leaf);
	return path_fmt(buf, sz, "%s/%s", d->pin_dir, sub);
}

static int unlink_quiet(const char *path)
{
	int err;

	if (!unlink(path) || errno == ENOENT)
		return 0;
	err = -errno;
	pr_warn("remove pin %s: %s", path, strerror(-err));
	return err;
}

/* Unlink every entry of a pin directory; a missing directory is empty. */
static int dir_clear(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	int err = 0, e;
	DIR *dh;

	dh = opendir(dir);
	if (!dh)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(dh))) {
		if (de->d_name[0] == '.')
			continue;
		e = path_fmt(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!e) {
			pr_debug("removing pin %s", path);
			e = unlink_quiet(path);
		}
		if (e && !err)
			err = e;
	}
	closedir(dh);
	return err;
}

static void rmdir_quiet(const char *path)
{
	if (rmdir(path) && errno != ENOENT)
		pr_info("remove %s: %s", path, strerror(errno));
}

/* ---- maps ---- */

static int map_add(struct dpp *d, const char *name, int fd)
{
	struct dpp_map_ref *m;

	if (d->nr_maps == DPP_MAPS_MAX) {
		pr_warn("more than %d maps in the BPF object", DPP_MAPS_MAX);
		return -E2BIG;
	}
	if (strlen(name) >= sizeof(m->name)) {
		pr_warn("map name %s too long", name);
		return -ENAMETOOLONG;
	}
	m = &d->maps[d->nr_maps++];
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->fd = fd;
	return 0;
}

static struct dpp_map_ref *map_find(const struct dpp *d, const char *name)
{
	int i;

	for (i = 0; i < d->nr_maps; i++) {
		if (!strcmp(d->maps[i].name, name))
			return (struct dpp_map_ref *)&d->maps[i];
	}
	return NULL;
}

/* Own a copy of every non-internal map fd of the loaded object (the skeleton keeps its own). */
static int maps_collect_loaded(struct dpp *d)
{
	struct bpf_map *map;
	int fd, err;

	bpf_object__for_each_map(map, d->skel->obj) {
		if (bpf_map__is_internal(map))
			continue;
		fd = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			err = -errno;
			pr_warn("dup fd of map %s: %s", bpf_map__name(map), strerror(-err));
			return err;
		}
		err = map_add(d, bpf_map__name(map), fd);
		if (err) {
			close(fd);
			return err;
		}
	}
	return 0;
}

static int maps_collect_pinned(struct dpp *d)
{
	char dir[PATH_MAX], path[PATH_MAX];
	struct dirent *de;
	int fd, err;
	DIR *dh;

	err = pin_path(d, dir, sizeof(dir), "maps", NULL);
	if (err)
		return err;
	dh = opendir(dir);
	if (!dh) {
		err = -errno;
		pr_warn("open %s: %s", dir, strerror(-err));
		return err;
	}
	while ((de = readdir(dh))) {
		if (de->d_name[0] == '.')
			continue;
		err = path_fmt(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (err)
			break;
		fd = bpf_obj_get(path);
		if (fd < 0) {
			err = fd;
			pr_warn("open pinned map %s: %s", path, strerror(-err));
			break;
		}
		err = map_add(d, de->d_name, fd);
		if (err) {
			close(fd);
			break;
		}
	}
	closedir(dh);
	return err;
}

/* dpp_flows holds a row of slots per possible CPU, a power of two in each. */
static bool flow_rows_valid(const struct dpp *d, __u32 max_entries)
{
	__u32 row = max_entries / d->ncpus;

	return row && row * d->ncpus == max_entries && !(row & (row - 1));
}

/* Returns -EPROTO when a map does not have the layout this libdpp was built against. */
static int map_check(struct dpp *d, enum dpp_map_id id)
{
	const struct dpp_map_spec *spec = &dpp_map_specs[id];
	struct bpf_map_info info = {};
	__u32 len = sizeof(info);
	struct dpp_map_ref *m;
	const char *hint;
	int err;

	hint = d->reused ? "the ABI changed: unpin the instance and load it again"
			 : "the BPF object and libdpp were built from different headers";
	m = map_find(d, spec->name);
	if (!m) {
		pr_warn("map %s missing: %s", spec->name, hint);
		return -EPROTO;
	}
	err = bpf_obj_get_info_by_fd(m->fd, &info, &len);
	if (err) {
		pr_warn("get info of map %s: %s", spec->name, strerror(-err));
		return err;
	}
	if (info.type != spec->type || info.key_size != spec->key_size ||
	    info.value_size != spec->value_size) {
		pr_warn("map %s is type %u key %u value %u bytes, "
			"expected type %u key %u value %u: %s",
			spec->name, info.type, info.key_size, info.value_size, spec->type,
			spec->key_size, spec->value_size, hint);
		return -EPROTO;
	}
	/* The program masks flow hashes with a row's slot count: anything else would leave slots
	 * unused, or rows overlapping. */
	if (id == DPP_MAP_FLOWS && !flow_rows_valid(d, info.max_entries)) {
		pr_warn("map %s has %u slots, not a power of two per possible CPU: %s", spec->name,
			info.max_entries, hint);
		return -EPROTO;
	}
	m->max_entries = info.max_entries;
	d->known[id] = m;
	return 0;
}

static int maps_check(struct dpp *d)
{
	int id, err;

	for (id = 0; id < DPP_MAP_NR; id++) {
		err = map_check(d, id);
		if (err)
			return err;
	}
	return 0;
}

/* ---- links ---- */

static int link_find(const struct dpp *d, int ifindex)
{
	int i;

	for (i = 0; i < d->nr_links; i++) {
		if (d->links[i].ifindex == ifindex)
			return i;
	}
	return -ENOENT;
}

static int link_add(struct dpp *d, int ifindex, int fd)
{
	struct dpp_link_ref *l;
	int cap;

	if (d->nr_links == d->cap_links) {
		cap = d->cap_links ? d->cap_links * 2 : 8;
		l = realloc(d->links, (size_t)cap * sizeof(*l));
		if (!l)
			return -ENOMEM;
		d->links = l;
		d->cap_links = cap;
	}
	d->links[d->nr_links].ifindex = ifindex;
	d->links[d->nr_links].fd = fd;
	d->nr_links++;
	return 0;
}

/* 1 while the link is attached to a device, 0 once the device is gone, else -errno. */
static int link_live(int fd)
{
	struct bpf_link_info info = {};
	__u32 len = sizeof(info);
	int err;

	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	return info.type == BPF_LINK_TYPE_XDP && info.xdp.ifindex != 0;
}

static int link_pin_path(const struct dpp *d, int ifindex, char *buf, size_t sz)
{
	char leaf[16];

	snprintf(leaf, sizeof(leaf), "%d", ifindex);
	return pin_path(d, buf, sz, "links", leaf);
}

/* Forget link i: unpin it, detach it (other processes may hold fds on it) and close it. */
static int link_drop(struct dpp *d, int i)
{
	struct dpp_link_ref l = d->links[i];
	char path[PATH_MAX];
	int err = 0, e;

	if (d->pin_dir[0] && !link_pin_path(d, l.ifindex, path, sizeof(path)))
		err = unlink_quiet(path);
	e = bpf_link_detach(l.fd);
	if (e) {
		pr_warn("detach XDP link on ifindex %d: %s", l.ifindex, strerror(-e));
		if (!err)
			err = e;
	}
	close(l.fd);
	d->links[i] = d->links[--d->nr_links];
	return err;
}

/* Pick up links pinned by any process (the pins are the truth for named instances). */
static int links_scan(struct dpp *d)
{
	char dir[PATH_MAX], path[PATH_MAX], *end;
	struct dirent *de;
	int err = 0, fd;
	long ifindex;
	DIR *dh;

	if (!d->pin_dir[0])
		return 0;
	err = pin_path(d, dir, sizeof(dir), "links", NULL);
	if (err)
		return err;
	dh = opendir(dir);
	if (!dh)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(dh))) {
		ifindex = strtol(de->d_name, &end, 10);
		if (de->d_name[0] == '.' || *end || ifindex <= 0 || ifindex > INT_MAX)
			continue;
		if (link_find(d, (int)ifindex) >= 0)
			continue;
		err = path_fmt(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (err)
			break;
		fd = bpf_obj_get(path);
		if (fd < 0) {
			err = fd;
			pr_warn("open pinned link %s: %s", path, strerror(-err));
			break;
		}
		err = link_add(d, (int)ifindex, fd);
		if (err) {
			close(fd);
			break;
		}
	}
	closedir(dh);
	return err;
}

static int links_drop_all(struct dpp *d)
{
	int err, e;

	err = links_scan(d);
	while (d->nr_links) {
		e = link_drop(d, d->nr_links - 1);
		if (e && !err)
			err = e;
	}
	return err;
}

/* ---- lifecycle ---- */

/* Copy a caller's options struct (first member: size_t sz, its size as the caller was built) into
 * ours of out_sz bytes: an older caller's missing tail reads as zero, and a newer caller's options
 * we do not know about must all be unset. in NULL: all zero. */
static int opts_copy(const void *in, void *out, size_t out_sz)
{
	const char *bytes = in;
	size_t in_sz, i;

	memset(out, 0, out_sz);
	if (!in)
		return 0;
	in_sz = *(const size_t *)in;
	if (in_sz < sizeof(size_t))
		return -EINVAL;
	for (i = out_sz; i < in_sz; i++) {
		if (bytes[i])
			return -E2BIG;
	}
	memcpy(out, in, in_sz < out_sz ? in_sz : out_sz);
	*(size_t *)out = out_sz;
	return 0;
}

static int handle_alloc(struct dpp **out)
{
	struct dpp *d;
	int ncpus;

	ncpus = libbpf_num_possible_cpus();
	if (ncpus < 0) {
		pr_warn("count possible CPUs: %s", strerror(-ncpus));
		return ncpus;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->prog_fd = -1;
	d->ncpus = ncpus;
	*out = d;
	return 0;
}

static int instance_name_set(struct dpp *d, const char *name)
{
	if (!instance_name_valid(name)) {
		pr_warn("invalid instance name '%s': use 1 to %d of [A-Za-z0-9_-]", name,
			DPP_INSTANCE_NAME_MAX);
		return -EINVAL;
	}
	snprintf(d->instance, sizeof(d->instance), "%s", name);
	return path_fmt(d->pin_dir, sizeof(d->pin_dir), "%s/%s", DPP_PIN_ROOT, name);
}

/* Flow cache slots: max_flows rounded up to a power of two (the program masks its hash with
 * slots - 1), or DPP_MAX_FLOWS. 0 when max_flows cannot be rounded up within 32 bits. */
static __u32 flow_slots(__u32 max_flows)
{
	__u32 n = 1;

	if (!max_flows)
		return DPP_MAX_FLOWS;
	if (max_flows > 1u << 31)
		return 0;
	while (n < max_flows)
		n <<= 1;
	return n;
}

static int skel_configure(struct dpp *d, const struct dpp_open_opts *o)
{
	__u32 slots = flow_slots(o->max_flows), rules = o->max_rules ?: DPP_MAX_RULES;
	struct dpp_bpf *s = d->skel;
	int err;

	if (!slots) {
		pr_warn("%u flow cache slots: at most %u", o->max_flows, 1u << 31);
		return -E2BIG;
	}
	if ((__u64)slots * d->ncpus > UINT32_MAX || (__u64)rules * d->ncpus > UINT32_MAX) {
		pr_warn("%u rules and %u flow slots on %d CPUs: at most %llu each", rules, slots,
			d->ncpus, (unsigned long long)UINT32_MAX / d->ncpus);
		return -E2BIG;
	}
	s->rodata->cfg_flow_cache = o->flow_cache;
	s->rodata->cfg_flow_slots = slots;
	s->rodata->cfg_trace = o->trace;
	s->rodata->cfg_rule_slots = rules;
	err = bpf_map__set_max_entries(s->maps.dpp_rules, rules);
	if (!err)
		err = bpf_map__set_max_entries(s->maps.dpp_rule_stats, rules * d->ncpus);
	if (!err)
		err = bpf_map__set_max_entries(s->maps.dpp_flows, slots * d->ncpus);
	if (err)
		pr_warn("size the rule and flow maps: %s", strerror(-err));
	return err;
}

static int config_init(struct dpp *d, const struct dpp_open_opts *o)
{
	struct dpp_config cfg = {
		.generation = 1,
		.shape_set = 0,
		/* 0 (ABORTED) is never a sensible default, so it means "unset" in the options */
		.default_verdict = o->default_verdict ?: DPP_VERDICT_PASS,
		.default_alt_group = DPP_NONE,
		.meter_window_ns = o->meter_window_ns ?: DPP_DEFAULT_WINDOW_NS,
	};

	return update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
}

static int maps_pin(struct dpp *d)
{
	char path[PATH_MAX];
	int i, err = 0;

	for (i = 0; i < d->nr_maps; i++) {
		err = pin_path(d, path, sizeof(path), "maps", d->maps[i].name);
		if (!err)
			err = bpf_obj_pin(d->maps[i].fd, path);
		if (err) {
			pr_warn("pin map %s: %s", d->maps[i].name, strerror(-err));
			return err;
		}
	}
	return 0;
}

/* Undo pins_create(); also clears what a crashed load or unload left behind. */
static int pins_clear(struct dpp *d)
{
	char path[PATH_MAX];
	int err, e;

	err = pin_path(d, path, sizeof(path), "prog", NULL);
	if (!err)
		err = unlink_quiet(path);
	e = links_drop_all(d);
	if (e && !err)
		err = e;
	e = pin_path(d, path, sizeof(path), "maps", NULL);
	if (!e)
		e = dir_clear(path);
	if (e && !err)
		err = e;
	return err;
}

static void pin_dirs_remove(struct dpp *d)
{
	char path[PATH_MAX];

	if (!pin_path(d, path, sizeof(path), "maps", NULL))
		rmdir_quiet(path);
	if (!pin_path(d, path, sizeof(path), "links", NULL))
		rmdir_quiet(path);
	rmdir_quiet(d->pin_dir);
}

/* Maps first, program last: the program pin is what marks the instance as complete. */
static int pins_create(struct dpp *d)
{
	char path[PATH_MAX];
	int err;

	err = path_exists(d->pin_dir);
	if (err > 0) {
		pr_warn("instance '%s' left pins but no program pin (interrupted load or unload): "
			"replacing them", d->instance);
		err = pins_clear(d);
	}
	if (err)
		return err;
	err = pin_path(d, path, sizeof(path), "maps", NULL);
	if (!err)
		err = mkdir_p(path);
	if (!err)
		err = pin_path(d, path, sizeof(path), "links", NULL);
	if (!err)
		err = mkdir_p(path);
	if (!err)
		err = maps_pin(d);
	if (!err)
		err = pin_path(d, path, sizeof(path), "prog", NULL);
	if (!err) {
		err = bpf_obj_pin(d->prog_fd, path);
		if (err)
			pr_warn("pin program at %s: %s", path, strerror(-err));
	}
	if (err) {
		pins_clear(d);
		pin_dirs_remove(d);
	}
	return err;
}

static int instance_load(struct dpp *d, const struct dpp_open_opts *o)
{
	int err;

	if (o->default_verdict >= DPP_VERDICT_MAX) {
		pr_warn("invalid default verdict %u", o->default_verdict);
		return -EINVAL;
	}
	d->skel = dpp_bpf__open();
	if (!d->skel) {
		err = -errno;
		pr_warn("open BPF object: %s", strerror(-err));
		return err;
	}
	err = skel_configure(d, o);
	if (err)
		return err;
	err = dpp_bpf__load(d->skel);
	if (err) {
		pr_warn("load BPF object: %s", strerror(-err));
		return err;
	}
	d->prog_fd = fcntl(bpf_program__fd(d->skel->progs.dpp_xdp), F_DUPFD_CLOEXEC, 0);
	if (d->prog_fd < 0)
		return -errno;
	err = maps_collect_loaded(d);
	if (!err)
		err = maps_check(d);
	if (!err)
		err = config_init(d, o);
	if (!err && d->pin_dir[0])
		err = pins_create(d);
	return err;
}

static int prog_check_xdp(int fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	int err;

	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (err)
		return err;
	if (info.type != BPF_PROG_TYPE_XDP) {
		pr_warn("pinned program is type %u, not XDP", info.type);
		return -EPROTO;
	}
	return 0;
}

static int instance_reopen(struct dpp *d, const char *prog_path)
{
	int err;

	d->reused = true;
	d->prog_fd = bpf_obj_get(prog_path);
	if (d->prog_fd < 0) {
		err = d->prog_fd;
		pr_warn("open pinned program %s: %s", prog_path, strerror(-err));
		return err;
	}
	err = prog_check_xdp(d->prog_fd);
	if (!err)
		err = maps_collect_pinned(d);
	if (!err)
		err = maps_check(d);
	if (!err)
		err = links_scan(d);
	if (!err)
		pr_info("instance '%s' reused from %s", d->instance, d->pin_dir);
	return err;
}

/* 1 when the named instance's program is pinned, 0 when not, else -errno. */
static int instance_pinned(struct dpp *d, char *prog_path, size_t sz)
{
	int err;

	err = bpffs_ensure();
	if (!err)
		err = pin_path(d, prog_path, sz, "prog", NULL);
	if (err)
		return err;
	return path_exists(prog_path);
}

static int filter_count_rule(const struct dpp_flow_key *key, const struct dpp_rule *rule, void *ctx)
{
	(void)rule;
	filters_add(ctx, key, 1);
	return 0;
}

/* A reopened instance's filter counts, from its rules and published shapes: each published shape
 * keeps its filter and every rule is counted. Bits stay as they are: a bit no rule holds (left by a
 * writer that died between deleting a rule and clearing it) only costs a probe, and clearing bits
 * here could race with another handle's writes. */
static int filters_count(struct dpp *d)
{
	struct dpp_shape_set set;
	__u32 i;
	int err;

	err = dpp_shapes_get(d, &set);
	for (i = 0; !err && i < set.count && i < DPP_MAX_SHAPES; i++)
		filters_adopt(d->filters, set.shapes[i].mask.shape, set.filters[i]);
	if (!err)
		err = dpp_rules_foreach(d, filter_count_rule, d->filters);
	if (err)
		pr_warn("count the rules into the shape filters: %s", strerror(-err));
	return err;
}

/* Without its filters a shape is searched the slow way, never wrongly: a map that cannot be mapped
 * into memory costs the filters, not the instance. */
static void filters_init(struct dpp *d)
{
	int err = filters_open(map_fd(d, DPP_MAP_FILTERS), &d->filters);

	if (err)
		pr_warn("map the shape filters into memory: %s; shapes go unfiltered", strerror(-err));
	d->filters_counted = !d->reused;
}

/* Before the first change of rules or shapes through this handle: a reopened instance's rules are
 * counted then, not at open, so that handles that only read (dppctl status, a second look at the
 * maps) do not walk every rule. */
static int filters_ready(struct dpp *d)
{
	int err;

	if (d->filters_counted || !d->filters)
		return 0;
	err = filters_count(d);
	if (!err)
		d->filters_counted = true;
	return err;
}

int dpp_open(const struct dpp_open_opts *opts, struct dpp **out)
{
	char prog_path[PATH_MAX];
	struct dpp_open_opts o;
	struct dpp *d = NULL;
	int err, pinned = 0;

	log_hook_libbpf();
	if (!out)
		return -EINVAL;
	*out = NULL;
	err = opts_copy(opts, &o, sizeof(o));
	if (err)
		return err;
	err = handle_alloc(&d);
	if (err)
		return err;
	if (o.instance) {
		err = instance_name_set(d, o.instance);
		if (!err)
			pinned = instance_pinned(d, prog_path, sizeof(prog_path));
		if (!err && pinned < 0)
			err = pinned;
		if (err)
			goto cleanup;
	}
	err = pinned ? instance_reopen(d, prog_path) : instance_load(d, &o);
	if (!err)
		filters_init(d);
	if (err)
		goto cleanup;
	*out = d;
	return 0;
cleanup:
	dpp_close(d);
	return err;
}

void dpp_close(struct dpp *d)
{
	int i;

	if (!d)
		return;
	for (i = 0; i < d->nr_links; i++)
		close(d->links[i].fd);
	for (i = 0; i < d->nr_maps; i++)
		close(d->maps[i].fd);
	if (d->prog_fd >= 0)
		close(d->prog_fd);
	filters_close(d->filters);
	dpp_bpf__destroy(d->skel);
	free(d->links);
	free(d);
}

int dpp_unpin(struct dpp *d)
{
	int err;

	if (!d)
		return -EINVAL;
	if (!d->pin_dir[0])
		return 0;
	err = pins_clear(d);
	pin_dirs_remove(d);
	/* The handle now behaves as an anonymous instance: nothing more gets pinned. */
	d->pin_dir[0] = '\0';
	return err;
}

int dpp_reused(const struct dpp *d)
{
	return d && d->reused ? 1 : 0;
}

int dpp_prog_fd(const struct dpp *d)
{
	return d ? d->prog_fd : -EINVAL;
}

int dpp_map_fd(const struct dpp *d, const char *name)
{
	const struct dpp_map_ref *m;

	if (!d || !name)
		return -EINVAL;
	m = map_find(d, name);
	return m ? m->fd : -ENOENT;
}

/* ---- attach ---- */

static int xdp_mode_flags(enum dpp_xdp_mode mode, __u32 *flags)
{
	switch (mode) {
	case DPP_XDP_MODE_NATIVE:
		*flags = XDP_FLAGS_DRV_MODE;
		return 0;
	case DPP_XDP_MODE_GENERIC:
		*flags = XDP_FLAGS_SKB_MODE;
		return 0;
	case DPP_XDP_MODE_OFFLOAD:
		*flags = XDP_FLAGS_HW_MODE;
		return 0;
	}
	pr_warn("invalid XDP mode %d", (int)mode);
	return -EINVAL;
}

static int attach_error(int err, const char *ifname, enum dpp_xdp_mode mode)
{
	if (err == -EOPNOTSUPP && mode == DPP_XDP_MODE_NATIVE) {
		pr_warn("native XDP not supported by %s's driver; use generic mode", ifname);
		return err;
	}
	if (err == -EBUSY || err == -EEXIST) {
		pr_warn("another XDP program is attached to %s; detach it first", ifname);
		return -EEXIST;
	}
	pr_warn("attach XDP to %s: %s", ifname, strerror(-err));
	return err;
}

/* A link whose device went away stays pinned: forget it so the ifindex can be attached again. */
static int attach_check_free(struct dpp *d, int ifindex, const char *ifname)
{
	int i, live, err;

	err = links_scan(d);
	if (err)
		return err;
	i = link_find(d, ifindex);
	if (i < 0)
		return 0;
	live = link_live(d->links[i].fd);
	if (live < 0)
		return live;
	if (live) {
		pr_warn("instance is already attached to %s", ifname);
		return -EEXIST;
	}
	return link_drop(d, i);
}

int dpp_attach(struct dpp *d, int ifindex, enum dpp_xdp_mode mode)
{
	LIBBPF_OPTS(bpf_link_create_opts, lopts);
	char ifname[IF_NAMESIZE + 16], path[PATH_MAX];
	bool pinned = false;
	int fd = -1, err;
	__u32 flags;

	if (!d || ifindex <= 0)
		return -EINVAL;
	ifname_of(ifindex, ifname);
	err = xdp_mode_flags(mode, &flags);
	if (!err)
		err = attach_check_free(d, ifindex, ifname);
	if (err)
		return err;
	lopts.flags = flags;
	fd = bpf_link_create(d->prog_fd, ifindex, BPF_XDP, &lopts);
	if (fd < 0)
		return attach_error(fd, ifname, mode);
	if (d->pin_dir[0]) {
		err = link_pin_path(d, ifindex, path, sizeof(path));
		if (!err)
			err = bpf_obj_pin(fd, path);
		if (err) {
			pr_warn("pin XDP link of %s: %s", ifname, strerror(-err));
			goto cleanup;
		}
		pinned = true;
	}
	err = link_add(d, ifindex, fd);
	if (err)
		goto cleanup;
	pr_info("attached to %s", ifname);
	return 0;
cleanup:
	if (pinned)
		unlink_quiet(path);
	close(fd);
	return err;
}

int dpp_detach(struct dpp *d, int ifindex)
{
	int i, err;

	if (!d)
		return -EINVAL;
	err = links_scan(d);
	if (err)
		return err;
	i = link_find(d, ifindex);
	if (i < 0)
		return -ENOENT;
	return link_drop(d, i);
}

int dpp_attached(struct dpp *d, int *ifindexes, int max)
{
	int i, n = 0, live, err;

	if (!d || (max > 0 && !ifindexes))
		return -EINVAL;
	err = links_scan(d);
	if (err)
		return err;
	for (i = 0; i < d->nr_links; i++) {
		live = link_live(d->links[i].fd);
		if (live < 0)
			return live;
		if (!live)
			continue;
		if (n < max)
			ifindexes[n] = d->links[i].ifindex;
		n++;
	}
	return n;
}

/* ---- batched map writes ---- */

/* Per element, for kernels or map types without batch ops. *done counts what was applied. */
static int update_each(int fd, const char *keys, size_t ksz, const char *vals, size_t vsz, __u32 n,
		       __u32 *done)
{
	__u32 i;
	int err = 0;

	for (i = 0; i < n; i++) {
		err = bpf_map_update_elem(fd, keys + i * ksz, vals + i * vsz, BPF_ANY);
		if (err)
			break;
	}
	*done = i;
	return err;
}

static int delete_each(int fd, const char *keys, size_t ksz, __u32 n, __u32 *done)
{
	__u32 i;
	int err = 0;

	for (i = 0; i < n; i++) {
		err = bpf_map_delete_elem(fd, keys + i * ksz);
		if (err)
			break;
	}
	*done = i;
	return err;
}

/* The kernel writes back how far a batch got only once it started; an early rejection leaves
 * the requested count in place, which must not be mistaken for "all applied". */
static __u32 batch_progress(int err, __u32 requested, __u32 reported)
{
	if (err && reported >= requested)
		return 0;
	return reported;
}

static int update_chunk(int fd, const char *keys, size_t ksz, const char *vals, size_t vsz,
			__u32 n, __u32 *done)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts);
	__u32 cnt = n;
	int err;

	err = bpf_map_update_batch(fd, keys, vals, &cnt, &bopts);
	cnt = batch_progress(err, n, cnt);
	if (err && !cnt && batch_unsupported(err))
		return update_each(fd, keys, ksz, vals, vsz, n, done);
	*done = cnt;
	return err;
}

static int delete_chunk(int fd, const char *keys, size_t ksz, __u32 n, __u32 *done)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts);
	__u32 cnt = n;
	int err;

	err = bpf_map_delete_batch(fd, keys, &cnt, &bopts);
	cnt = batch_progress(err, n, cnt);
	if (err && !cnt && batch_unsupported(err))
		return delete_each(fd, keys, ksz, n, done);
	*done = cnt;
	return err;
}

/* vals NULL: delete keys. Applies in order, in chunks; *done is what was applied. */
static int batch_apply(int fd, const void *keys, size_t ksz, const void *vals, size_t vsz, __u32 n,
		       __u32 *done)
{
	const char *k = keys, *v = vals;
	__u32 off = 0, cnt, got;
	int err = 0;

	while (off < n) {
		cnt = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
		got = 0;
		if (vals)
			err = update_chunk(fd, k + off * ksz, ksz, v + off * vsz, vsz, cnt, &got);
		else
			err = delete_chunk(fd, k + off * ksz, ksz, cnt, &got);
		off += got;
		if (err)
			break;
	}
	*done = off;
	return err;
}

/* One rule, new or replacing: *was_new says which, for the filter counts. */
static int rule_put(int fd, const struct dpp_flow_key *key, const struct dpp_rule *rule, bool *was_new)
{
	int err = bpf_map_update_elem(fd, key, rule, BPF_NOEXIST);

	*was_new = !err;
	if (err != -EEXIST)
		return err;
	err = bpf_map_update_elem(fd, key, rule, BPF_EXIST);
	if (err == -ENOENT) { /* deleted in between: new after all */
		err = bpf_map_update_elem(fd, key, rule, BPF_NOEXIST);
		*was_new = !err;
	}
	return err;
}

/* Adds rules in batches that only create (BPF_NOEXIST), so the keys that were there already,
 * where a batch stops, are known: they replace their rule one by one and are counted once in the
 * filters. *done: rules applied, in order. */
static int rules_insert(struct dpp *d, const struct dpp_flow_key *keys, const struct dpp_rule *rules,
			__u32 n, __u32 *done)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts, .elem_flags = BPF_NOEXIST);
	int fd = map_fd(d, DPP_MAP_RULES), err = 0;
	__u32 off = 0, want, cnt;
	bool was_new, batches = true;

	while (off < n) {
		want = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
		cnt = 0;
		if (batches) {
			cnt = want;
			err = bpf_map_update_batch(fd, keys + off, rules + off, &cnt, &bopts);
			cnt = batch_progress(err, want, cnt);
			batches = !(err && !cnt && batch_unsupported(err));
		}
		off += cnt;
		if (!err && cnt == want)
			continue;
		if (err && err != -EEXIST && batches)
			break;
		err = rule_put(fd, &keys[off], &rules[off], &was_new);
		if (err)
			break;
		if (!was_new)
			filters_sub(d->filters, &keys[off], 1);
		off++;
	}
	*done = off;
	return err;
}

int dpp_rules_upsert(struct dpp *d, const struct dpp_flow_key *keys, const struct dpp_rule *rules,
		     __u32 n, __u32 *done)
{
	__u32 applied = 0;
	int err = 0;

	if (!d || (n && (!keys || !rules)))
		return -EINVAL;
	err = filters_ready(d);
	if (err)
		return err;
	/* Bits first: the program never skips a shape for a key whose rule it could meet. */
	filters_add(d->filters, keys, n);
	if (n)
		err = rules_insert(d, keys, rules, n, &applied);
	filters_sub(d->filters, keys + applied, n - applied);
	if (err)
		pr_warn("install rules: %s after %u of %u", strerror(-err), applied, n);
	if (done)
		*done = applied;
	return err;
}

int dpp_rules_delete(struct dpp *d, const struct dpp_flow_key *keys, __u32 n, __u32 *done)
{
	__u32 applied = 0;
	int err = 0;

	if (!d || (n && !keys))
		return -EINVAL;
	err = filters_ready(d);
	if (!err && n)
		err = batch_apply(map_fd(d, DPP_MAP_RULES), keys, sizeof(*keys), NULL, 0, n,
				  &applied);
	/* Bits last: they go only once no rule can be met with them. */
	filters_sub(d->filters, keys, applied);
	if (err)
		pr_warn("delete rules: %s after %u of %u", strerror(-err), applied, n);
	if (done)
		*done = applied;
	return err;
}

int dpp_rules_foreach(struct dpp *d, dpp_rule_cb cb, void *ctx)
{
	struct dpp_flow_key key, next;
	struct dpp_rule rule;
	void *prev = NULL;
	int fd, err;

	if (!d || !cb)
		return -EINVAL;
	fd = map_fd(d, DPP_MAP_RULES);
	for (;;) {
		err = bpf_map_get_next_key(fd, prev, &next);
		if (err)
			return err == -ENOENT ? 0 : err;
		err = bpf_map_lookup_elem(fd, &next, &rule);
		/* A rule deleted between the two calls is simply not reported. */
		if (err && err != -ENOENT)
			return err;
		if (!err) {
			err = cb(&next, &rule, ctx);
			if (err)
				return err;
		}
		key = next;
		prev = &key;
	}
}

/* ---- shapes and config ---- */

static int config_read(struct dpp *d, struct dpp_config *cfg)
{
	return lookup_u32(d, DPP_MAP_CONFIG, 0, cfg);
}

/* Generation 0 is skipped on wrap-around: zero-filled flow cache entries must never look valid. */
static __u32 generation_next(__u32 gen)
{
	return gen + 1 ? gen + 1 : 1;
}

/* Gives each shape of a set about to be published its filter, and frees the filters of shapes
 * with no rules that neither it nor the set in use (slot `active`) names. */
static void shapes_filter(struct dpp *d, struct dpp_shape_set *set, __u32 active)
{
	__u32 keep[2 * DPP_MAX_SHAPES], n = 0, i;
	struct dpp_shape_set current;

	for (i = 0; i < set->count; i++) {
		set->filters[i] = filters_for_shape(d->filters, set->shapes[i].mask.shape);
		keep[n++] = set->shapes[i].mask.shape;
	}
	if (!lookup_u32(d, DPP_MAP_SHAPES, active ? 1 : 0, &current))
		for (i = 0; i < current.count && i < DPP_MAX_SHAPES; i++)
			keep[n++] = current.shapes[i].mask.shape;
	filters_release(d->filters, keep, n);
}

int dpp_shapes_publish(struct dpp *d, const struct dpp_shape *shapes, __u32 n)
{
	struct dpp_shape_set set = {};
	struct dpp_config cfg;
	__u32 slot;
	int err;

	if (!d || (n && !shapes))
		return -EINVAL;
	if (n > DPP_MAX_SHAPES) {
		pr_warn("%u shapes, at most %d", n, DPP_MAX_SHAPES);
		return -E2BIG;
	}
	/* Read-modify-write of the config: one control plane writes an instance at a time. */
	err = filters_ready(d);
	if (!err)
		err = config_read(d, &cfg);
	if (err)
		return err;
	slot = cfg.shape_set ? 0 : 1;
	set.count = n;
	if (n)
		memcpy(set.shapes, shapes, n * sizeof(*shapes));
	shapes_filter(d, &set, cfg.shape_set);
	err = update_u32(d, DPP_MAP_SHAPES, slot, &set);
	if (err)
		return err;
	/* One write flips the set and invalidates the flow cache together. */
	cfg.shape_set = slot;
	cfg.generation = generation_next(cfg.generation);
	return update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
}

int dpp_shapes_get(struct dpp *d, struct dpp_shape_set *out)
{
	struct dpp_config cfg;
	int err;

	if (!d || !out)
		return -EINVAL;
	err = config_read(d, &cfg);
	if (err)
		return err;
	return lookup_u32(d, DPP_MAP_SHAPES, cfg.shape_set ? 1 : 0, out);
}

int dpp_config_get(struct dpp *d, struct dpp_config *out)
{
	if (!d || !out)
		return -EINVAL;
	return config_read(d, out);
}

/* Packets a CPU may take per meter window; at least 1 so that a metered CPU is never shut off. */
static __u64 window_budget(__u64 capacity_pps, __u64 window_ns)
{
	unsigned __int128 b;

	if (!capacity_pps)
		return 0;
	b = (unsigned __int128)capacity_pps * window_ns / DPP_NSEC_PER_SEC;
	if (b > UINT64_MAX)
		return UINT64_MAX;
	return b ? (__u64)b : 1;
}

static __u32 cpu_limit(const struct dpp *d)
{
	return d->ncpus < DPP_MAX_CPUS ? (__u32)d->ncpus : DPP_MAX_CPUS;
}

/* The CPU's meter starts its first window now, empty (the program's clock is CLOCK_MONOTONIC). */
static int meter_restart(struct dpp *d, __u32 cpu)
{
	struct dpp_cpu_meter m = {};
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		return -errno;
	m.origin_ns = (__u64)ts.tv_sec * DPP_NSEC_PER_SEC + (__u64)ts.tv_nsec;
	return update_u32(d, DPP_MAP_CPU_METERS, cpu, &m);
}

/* Budgets are derived from the window length: recompute them when it changes. */
static int cpus_rebudget(struct dpp *d, __u64 window_ns)
{
	struct dpp_cpu c;
	__u32 cpu;
	int err;

	for (cpu = 0; cpu < cpu_limit(d); cpu++) {
		err = lookup_u32(d, DPP_MAP_CPUS, cpu, &c);
		if (err)
			return err;
		if (!c.enabled || !c.capacity_pps)
			continue;
		c.window_budget = window_budget(c.capacity_pps, window_ns);
		err = meter_restart(d, cpu);
		if (!err)
			err = update_u32(d, DPP_MAP_CPUS, cpu, &c);
		if (err)
			return err;
	}
	return 0;
}

static int config_valid(const struct dpp_config *cfg)
{
	if (cfg->shape_set > 1 || cfg->default_verdict >= DPP_VERDICT_MAX ||
	    !cfg->meter_window_ns) {
		pr_warn("invalid config: shape set %u, default verdict %u, meter window %llu ns",
			cfg->shape_set, cfg->default_verdict,
			(unsigned long long)cfg->meter_window_ns);
		return -EINVAL;
	}
	return 0;
}

int dpp_config_set(struct dpp *d, const struct dpp_config *cfg)
{
	struct dpp_config old;
	int err;

	if (!d || !cfg)
		return -EINVAL;
	err = config_valid(cfg);
	if (!err)
		err = config_read(d, &old);
	if (!err)
		err = update_u32(d, DPP_MAP_CONFIG, 0, cfg);
	if (!err && old.meter_window_ns != cfg->meter_window_ns)
		err = cpus_rebudget(d, cfg->meter_window_ns);
	return err;
}

/* ---- CPU set ---- */

static int cpu_check(const struct dpp *d, __u32 cpu)
{
	if (cpu < cpu_limit(d))
		return 0;
	pr_warn("CPU %u out of range: %d possible, at most %d", cpu, d->ncpus, DPP_MAX_CPUS);
	return -EINVAL;
}

int dpp_cpu_enable(struct dpp *d, __u32 cpu, __u32 queue_size, __u64 capacity_pps)
{
	struct bpf_cpumap_val qval = { .qsize = queue_size ?: DPP_DEFAULT_QSIZE };
	struct dpp_config cfg;
	struct dpp_cpu c;
	int err;

	if (!d)
		return -EINVAL;
	err = cpu_check(d, cpu);
	if (!err)
		err = config_read(d, &cfg);
	if (!err)
		err = lookup_u32(d, DPP_MAP_CPUS, cpu, &c);
	/* Queue first: the program steers only to enabled CPUs, which must have a queue. */
	if (!err)
		err = update_u32(d, DPP_MAP_CPU_MAP, cpu, &qval);
	if (err)
		return err;
	c.enabled = 1;
	c.capacity_pps = capacity_pps;
	c.window_budget = window_budget(capacity_pps, cfg.meter_window_ns);
	err = meter_restart(d, cpu);
	return err ?: update_u32(d, DPP_MAP_CPUS, cpu, &c);
}

/* 1 when the kernel takes a CPUMAP queue of qsize frames, 0 when it refuses it as too large. */
static int qsize_taken(int fd, __u32 qsize)
{
	struct bpf_cpumap_val val = { .qsize = qsize };
	__u32 key = 0;
	int err = bpf_map_update_elem(fd, &key, &val, BPF_ANY);

	if (err == -EOVERFLOW)
		return 0;
	return err ?: 1;
}

/* The kernel refuses a queue above its limit before it allocates anything; a queue it takes costs
 * a ring and a kthread, freed with the map. The known limit is confirmed first (its successor
 * refused, then it taken), and the range between the largest size taken and the smallest refused
 * is bisected only when the running kernel differs. */
int dpp_cpumap_qsize_max(__u32 *out)
{
	__u32 taken = 0, refused = DPP_PROBE_QSIZE_MAX + 1, qsize, probes = 0;
	int fd, ok = 0;

	if (!out)
		return -EINVAL;
	fd = bpf_map_create(BPF_MAP_TYPE_CPUMAP, "dpp_qsize_probe", sizeof(__u32),
			    sizeof(struct bpf_cpumap_val), 1, NULL);
	if (fd < 0) {
		pr_warn("create a CPUMAP to probe its queue limit: %s", strerror(-fd));
		return fd;
	}
	while (refused - taken > 1) {
		qsize = probes == 0 ? DPP_KNOWN_QSIZE_MAX + 1 : DPP_KNOWN_QSIZE_MAX;
		if (probes++ > 1 || qsize <= taken || qsize >= refused)
			qsize = taken + (refused - taken) / 2;
		ok = qsize_taken(fd, qsize);
		if (ok < 0)
			break;
		if (ok)
			taken = qsize;
		else
			refused = qsize;
	}
	close(fd);
	if (ok < 0) {
		pr_warn("probe the CPUMAP queue limit: %s", strerror(-ok));
		return ok;
	}
	*out = taken;
	return 0;
}

int dpp_cpu_disable(struct dpp *d, __u32 cpu)
{
	struct dpp_cpu c = {};
	__u32 key = cpu;
	int err;

	if (!d)
		return -EINVAL;
	err = cpu_check(d, cpu);
	/* Leave the set before the queue goes, so that nothing is steered to a missing queue. */
	if (!err)
		err = update_u32(d, DPP_MAP_CPUS, cpu, &c);
	if (err)
		return err;
	err = bpf_map_delete_elem(map_fd(d, DPP_MAP_CPU_MAP), &key);
	if (err == -ENOENT)
		return 0;
	if (err)
		pr_warn("remove CPU %u from the CPUMAP: %s", cpu, strerror(-err));
	return err;
}

int dpp_cpu_set_overloaded(struct dpp *d, __u32 cpu, bool overloaded)
{
	struct dpp_cpu c;
	int err;

	if (!d)
		return -EINVAL;
	err = cpu_check(d, cpu);
	if (!err)
		err = lookup_u32(d, DPP_MAP_CPUS, cpu, &c);
	if (err)
		return err;
	c.overloaded = overloaded;
	return update_u32(d, DPP_MAP_CPUS, cpu, &c);
}

int dpp_cpu_get(struct dpp *d, __u32 cpu, struct dpp_cpu *out)
{
	int err;

	if (!d || !out)
		return -EINVAL;
	err = cpu_check(d, cpu);
	if (err)
		return err;
	return lookup_u32(d, DPP_MAP_CPUS, cpu, out);
}

/* ---- ports and alternative groups ---- */

int dpp_port_add(struct dpp *d, int ifindex)
{
	struct bpf_devmap_val val = { .ifindex = (__u32)ifindex };

	if (!d || ifindex <= 0)
		return -EINVAL;
	return update_u32(d, DPP_MAP_PORTS, (__u32)ifindex, &val);
}

int dpp_port_remove(struct dpp *d, int ifindex)
{
	__u32 key = (__u32)ifindex;

	if (!d || ifindex <= 0)
		return -EINVAL;
	return bpf_map_delete_elem(map_fd(d, DPP_MAP_PORTS), &key);
}

static int alt_group_check(__u32 group)
{
	if (group < DPP_MAX_ALT_GROUPS)
		return 0;
	pr_warn("alternative group %u out of range (< %d)", group, DPP_MAX_ALT_GROUPS);
	return -EINVAL;
}

int dpp_alt_group_set(struct dpp *d, __u32 group, const struct dpp_alt_group *g)
{
	int err;

	if (!d || !g)
		return -EINVAL;
	err = alt_group_check(group);
	if (err)
		return err;
	if (g->count > DPP_MAX_ALT_MEMBERS) {
		pr_warn("alternative group %u: %u members, at most %d", group, g->count,
			DPP_MAX_ALT_MEMBERS);
		return -EINVAL;
	}
	return update_u32(d, DPP_MAP_ALT_GROUPS, group, g);
}

int dpp_alt_group_clear(struct dpp *d, __u32 group)
{
	struct dpp_alt_group g = {};
	int err;

	if (!d)
		return -EINVAL;
	err = alt_group_check(group);
	if (err)
		return err;
	return update_u32(d, DPP_MAP_ALT_GROUPS, group, &g);
}

/* ---- counters ---- */

static void counters_sum(const struct dpp_counter *percpu, int ncpus, struct dpp_counter *out)
{
	int i;

	out->packets = 0;
	out->bytes = 0;
	for (i = 0; i < ncpus; i++) {
		out->packets += percpu[i].packets;
		out->bytes += percpu[i].bytes;
	}
}

/* Small per-CPU counter arrays (verdicts, actions, reasons, CPUs): one lookup per key. */
static int counters_read(struct dpp *d, enum dpp_map_id id, struct dpp_counter *out, __u32 n)
{
	struct dpp_counter *percpu;
	int err = 0;
	__u32 key;

	if (!out)
		return -EINVAL;
	percpu = calloc((size_t)d->ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	for (key = 0; key < n; key++) {
		err = lookup_u32(d, id, key, percpu);
		if (err)
			break;
		counters_sum(percpu, d->ncpus, &out[key]);
	}
	free(percpu);
	return err;
}

/* Rule slots per CPU row of dpp_rule_stats (rows of every possible CPU; see dpp_maps.h). */
static __u32 rule_slots(const struct dpp *d)
{
	return d->known[DPP_MAP_RULE_STATS]->max_entries / d->ncpus;
}

static int lookup_each(int fd, __u32 first, __u32 n, __u32 *keys, struct dpp_counter *vals)
{
	__u32 i;
	int err;

	for (i = 0; i < n; i++) {
		keys[i] = first + i;
		err = bpf_map_lookup_elem(fd, &keys[i], &vals[i]);
		if (err)
			return err;
	}
	return 0;
}

/* Counters [first, first + n) of dpp_rule_stats into keys/vals; n is at most one chunk. */
static int rule_stats_chunk(struct dpp *d, __u32 first, __u32 n, __u32 *keys,
			    struct dpp_counter *vals)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts);
	int fd = map_fd(d, DPP_MAP_RULE_STATS);
	__u32 prev = first - 1, next, cnt = n;
	int err;

	/* The batch cursor is the last key already read: NULL starts at key 0. */
	err = bpf_map_lookup_batch(fd, first ? &prev : NULL, &next, keys, vals, &cnt, &bopts);
	if (err == -ENOENT && cnt == n)
		err = 0;
	if (err && batch_unsupported(err))
		return lookup_each(fd, first, n, keys, vals);
	if (!err && cnt != n)
		err = -EIO;
	return err;
}

static int rule_stats_range(struct dpp *d, __u32 first, __u32 n)
{
	__u32 max = rule_slots(d);

	if (first <= max && n <= max - first)
		return 0;
	pr_warn("rule slots [%u, %u) out of range (< %u)", first, first + n, max);
	return -ERANGE;
}

static void counter_add(struct dpp_counter *sum, const struct dpp_counter *c)
{
	sum->packets += c->packets;
	sum->bytes += c->bytes;
}

/* Adds every CPU's row of slots [first, first + n) into out; n is at most one chunk. */
static int rule_stats_rows_add(struct dpp *d, __u32 first, __u32 n, __u32 *keys,
			       struct dpp_counter *vals, struct dpp_counter *out)
{
	__u32 row = rule_slots(d), i;
	int cpu, err;

	for (cpu = 0; cpu < d->ncpus; cpu++) {
		err = rule_stats_chunk(d, (__u32)cpu * row + first, n, keys, vals);
		if (err)
			return err;
		for (i = 0; i < n; i++)
			counter_add(&out[i], &vals[i]);
	}
	return 0;
}

int dpp_stats_rules(struct dpp *d, __u32 first, __u32 n, struct dpp_counter *out)
{
	struct dpp_counter *vals = NULL;
	__u32 *keys = NULL, off, cnt;
	int err;

	if (!d || (n && !out))
		return -EINVAL;
	err = rule_stats_range(d, first, n);
	if (err || !n)
		return err;
	keys = calloc(DPP_BATCH_CHUNK, sizeof(*keys));
	vals = calloc(DPP_BATCH_CHUNK, sizeof(*vals));
	if (!keys || !vals) {
		err = -ENOMEM;
		goto cleanup;
	}
	memset(out, 0, (size_t)n * sizeof(*out));
	for (off = 0; off < n; off += cnt) {
		cnt = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
		err = rule_stats_rows_add(d, first + off, cnt, keys, vals, out + off);
		if (err) {
			pr_warn("read rule counters from slot %u: %s", first + off, strerror(-err));
			goto cleanup;
		}
	}
cleanup:
	free(keys);
	free(vals);
	return err;
}

int dpp_stats_rules_clear(struct dpp *d, __u32 first, __u32 n)
{
	struct dpp_counter *zeros = NULL;
	__u32 *keys = NULL, row, off, cnt, i, got;
	int cpu, err;

	if (!d)
		return -EINVAL;
	err = rule_stats_range(d, first, n);
	if (err || !n)
		return err;
	keys = calloc(DPP_BATCH_CHUNK, sizeof(*keys));
	zeros = calloc(DPP_BATCH_CHUNK, sizeof(*zeros));
	if (!keys || !zeros) {
		err = -ENOMEM;
		goto cleanup;
	}
	row = rule_slots(d);
	for (cpu = 0; cpu < d->ncpus; cpu++) {
		for (off = 0; off < n; off += cnt) {
			cnt = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
			for (i = 0; i < cnt; i++)
				keys[i] = (__u32)cpu * row + first + off + i;
			err = batch_apply(map_fd(d, DPP_MAP_RULE_STATS), keys, sizeof(*keys), zeros,
					  sizeof(*zeros), cnt, &got);
			if (err) {
				pr_warn("clear rule counters from slot %u: %s", first + off + got,
					strerror(-err));
				goto cleanup;
			}
		}
	}
cleanup:
	free(keys);
	free(zeros);
	return err;
}

int dpp_stats_verdicts(struct dpp *d, struct dpp_counter out[DPP_VERDICT_MAX])
{
	if (!d)
		return -EINVAL;
	return counters_read(d, DPP_MAP_VERDICTS, out, DPP_VERDICT_MAX);
}

int dpp_stats_actions(struct dpp *d, struct dpp_counter out[DPP_ACTION_MAX])
{
	if (!d)
		return -EINVAL;
	return counters_read(d, DPP_MAP_ACTIONS, out, DPP_ACTION_MAX);
}

int dpp_stats_reasons(struct dpp *d, struct dpp_counter out[DPP_REASON_MAX])
{
	if (!d)
		return -EINVAL;
	return counters_read(d, DPP_MAP_REASONS, out, DPP_REASON_MAX);
}

int dpp_stats_cpus(struct dpp *d, struct dpp_counter *out, __u32 n)
{
	__u32 readable;

	if (!d || (n && !out))
		return -EINVAL;
	if (!n)
		return 0;
	if (n > DPP_MAX_CPUS) {
		pr_warn("%u CPU counters asked for, at most %d", n, DPP_MAX_CPUS);
		return -ERANGE;
	}
	/* The CPUMAP takes no CPU the kernel cannot have: the rest are zero without a syscall. */
	readable = n < (__u32)d->ncpus ? n : (__u32)d->ncpus;
	memset(out + readable, 0, (size_t)(n - readable) * sizeof(*out));
	return counters_read(d, DPP_MAP_CPU_STATS, out, readable);
}

/* ---- test run ---- */

int dpp_test_run(struct dpp *d, const void *pkt, __u32 len, __u32 ingress_ifindex, void *out,
		 __u32 *out_len, struct dpp_test_result *res)
{
	struct xdp_md ctx = { .data_end = len, .ingress_ifindex = ingress_ifindex };
	LIBBPF_OPTS(bpf_test_run_opts, topts, .data_in = pkt, .data_size_in = len, .repeat = 1);
	struct dpp_trace trace = {};
	int err;

	if (!d || !pkt || !len || (out && !out_len))
		return -EINVAL;
	if (out) {
		topts.data_out = out;
		topts.data_size_out = *out_len;
	}
	if (ingress_ifindex) {
		topts.ctx_in = &ctx;
		topts.ctx_size_in = sizeof(ctx);
	}
	/* A program loaded without trace never writes the slot: zeroing it keeps results clean. */
	err = update_u32(d, DPP_MAP_TRACE, 0, &trace);
	if (err)
		return err;
	err = bpf_prog_test_run_opts(d->prog_fd, &topts);
	if (out_len)
		*out_len = topts.data_size_out;
	if (err) {
		pr_warn("test run: %s", strerror(-err));
		return err;
	}
	if (!res)
		return 0;
	err = lookup_u32(d, DPP_MAP_TRACE, 0, &trace);
	if (err)
		return err;
	res->verdict = topts.retval;
	res->duration_ns = topts.duration;
	res->trace = trace;
	return 0;
}

/* ---- program upgrade ---- */

/* Point every live link of the instance at to_fd, if it still runs from_fd. Returns 0, or -errno
 * with *switched telling how many links (in d->links order) were moved before the failure. */
static int links_switch(struct dpp *d, int from_fd, int to_fd, int *switched)
{
	LIBBPF_OPTS(bpf_link_update_opts, uopts, .flags = BPF_F_REPLACE, .old_prog_fd = from_fd);
	int i, live, err;

	for (i = 0, *switched = 0; i < d->nr_links; i++, (*switched)++) {
		live = link_live(d->links[i].fd);
		if (live < 0)
			return live;
		if (!live)
			continue;
		err = bpf_link_update(d->links[i].fd, to_fd, &uopts);
		if (err) {
			pr_warn("switch the XDP link on ifindex %d to the new program: %s",
				d->links[i].ifindex, strerror(-err));
			return err;
		}
	}
	return 0;
}

static void links_switch_back(struct dpp *d, int from_fd, int to_fd, int count)
{
	struct dpp_link_ref *all = d->links;
	int nr = d->nr_links, moved;

	/* Switch just the first `count` links back, by narrowing the array for the call. */
	d->nr_links = count;
	if (links_switch(d, from_fd, to_fd, &moved))
		pr_warn("%d of %d links could not be switched back to the previous program",
			count - moved, count);
	d->links = all;
	d->nr_links = nr;
}

/* Open the object this library carries with every map the instance has bound to it, so the new
 * program shares the running one's rules, counters and configuration. libbpf refuses to load
 * when a bound map's type, key, value or size differs from what the object declares. */
static int upgrade_skel_open(struct dpp *d, const struct dpp_upgrade_opts *o,
			     struct dpp_bpf **out)
{
	struct dpp_bpf *skel;
	struct dpp_map_ref *m;
	struct bpf_map *map;
	int err = 0;

	skel = dpp_bpf__open();
	if (!skel) {
		err = -errno;
		pr_warn("open BPF object: %s", strerror(-err));
		return err;
	}
	skel->rodata->cfg_flow_cache = o->flow_cache;
	skel->rodata->cfg_trace = o->trace;
	skel->rodata->cfg_flow_slots = d->known[DPP_MAP_FLOWS]->max_entries / d->ncpus;
	skel->rodata->cfg_rule_slots = rule_slots(d);
	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map) || !(m = map_find(d, bpf_map__name(map))))
			continue;
		err = bpf_map__reuse_fd(map, m->fd);
		if (err) {
			pr_warn("bind map %s to the new program: %s", m->name, strerror(-err));
			break;
		}
	}
	if (!err) {
		err = dpp_bpf__load(skel);
		if (err)
			pr_warn("load the new program (its maps must match the running instance's): %s",
				strerror(-err));
	}
	if (err) {
		dpp_bpf__destroy(skel);
		return err;
	}
	*out = skel;
	return 0;
}

/* Maps the new object has and the instance had not (a newer build added them): own and pin. */
static int upgrade_maps_adopt(struct dpp *d, struct dpp_bpf *skel)
{
	char path[PATH_MAX];
	struct bpf_map *map;
	int fd, err;

	bpf_object__for_each_map(map, skel->obj) {
		if (bpf_map__is_internal(map) || map_find(d, bpf_map__name(map)))
			continue;
		fd = fcntl(bpf_map__fd(map), F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		err = map_add(d, bpf_map__name(map), fd);
		if (err) {
			close(fd);
			return err;
		}
		if (!d->pin_dir[0])
			continue;
		err = pin_path(d, path, sizeof(path), "maps", bpf_map__name(map));
		if (!err)
			err = bpf_obj_pin(fd, path);
		if (err) {
			pr_warn("pin new map %s: %s", bpf_map__name(map), strerror(-err));
			return err;
		}
		pr_info("new map %s", bpf_map__name(map));
	}
	return 0;
}

/* Replace the program pin in one step: pin beside it, then rename over it (bpffs names may not
 * contain dots). */
static int prog_repin(struct dpp *d, int prog_fd)
{
	char path[PATH_MAX], next[PATH_MAX];
	int err;

	if (!d->pin_dir[0])
		return 0;
	err = pin_path(d, path, sizeof(path), "prog", NULL);
	if (!err)
		err = pin_path(d, next, sizeof(next), "prog_next", NULL);
	if (err)
		return err;
	unlink_quiet(next);
	err = bpf_obj_pin(prog_fd, next);
	if (!err && rename(next, path))
		err = -errno;
	if (err) {
		pr_warn("pin the new program at %s: %s", path, strerror(-err));
		unlink_quiet(next);
	}
	return err;
}

/* Cached flow decisions were made by the old program: have the new one classify them again. */
static int flows_invalidate(struct dpp *d)
{
	struct dpp_config cfg;
	int err;

	err = config_read(d, &cfg);
	if (err)
		return err;
	cfg.generation = generation_next(cfg.generation);
	return update_u32(d, DPP_MAP_CONFIG, 0, &cfg);
}

int dpp_upgrade(struct dpp *d, const struct dpp_upgrade_opts *opts)
{
	struct dpp_upgrade_opts o;
	struct dpp_bpf *skel = NULL;
	int err, new_fd = -1, switched = 0;

	if (!d)
		return -EINVAL;
	err = opts_copy(opts, &o, sizeof(o));
	if (!opts)
		o.flow_cache = true;
	if (!err)
		err = links_scan(d);
	if (!err)
		err = upgrade_skel_open(d, &o, &skel);
	if (err)
		return err;
	new_fd = fcntl(bpf_program__fd(skel->progs.dpp_xdp), F_DUPFD_CLOEXEC, 0);
	if (new_fd < 0) {
		err = -errno;
		goto cleanup;
	}
	err = upgrade_maps_adopt(d, skel);
	if (!err)
		err = links_switch(d, d->prog_fd, new_fd, &switched);
	if (!err)
		err = prog_repin(d, new_fd);
	if (err) {
		links_switch_back(d, new_fd, d->prog_fd, switched);
		goto cleanup;
	}
	if (flows_invalidate(d))
		pr_warn("the flow cache keeps decisions of the previous program until rules change");
	pr_info("instance '%s': program replaced on %d interface(s)", d->instance, d->nr_links);
	close(d->prog_fd);
	d->prog_fd = new_fd;
	new_fd = -1;
	dpp_bpf__destroy(d->skel);
	d->skel = skel;
	skel = NULL;
cleanup:
	if (new_fd >= 0)
		close(new_fd);
	dpp_bpf__destroy(skel);
	return err;
}
