// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* An instance's pins on bpffs: <DPP_PIN_ROOT>/<instance>/ holds maps/<map>, links/<ifindex>,
 * progs/<program> (the programs the entry tail-calls) and prog (the XDP entry), the entry's pin
 * last, as the mark of a complete instance. An upgrade pins its new objects under next/ first. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/magic.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

/* Where bpffs must be mounted for DPP_PIN_ROOT to be a bpffs path. */
#define DPP_BPFFS_MOUNT "/sys/fs/bpf"

__attribute__((format(printf, 3, 4)))
int path_fmt(char *buf, size_t sz, const char *fmt, ...)
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

/* The fd of the object pinned as dir/name (what: "map", "link", ... for the warning), or -errno. */
int pin_open(const char *dir, const char *name, const char *what)
{
	char path[PATH_MAX];
	int fd = path_fmt(path, sizeof(path), "%s/%s", dir, name);

	if (fd)
		return fd;
	fd = bpf_obj_get(path);
	if (fd < 0)
		pr_warn("open pinned %s %s: %s", what, path, strerror(-fd));
	return fd;
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
	return mkdir(path, 0700) && errno != EEXIST ? -errno : 0;
}

static int mkdir_p_once(char *buf)
{
	char *p;
	int err;

	for (p = strchr(buf + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		err = mkdir_one(buf);
		*p = '/';
		if (err)
			return err;
	}
	return mkdir_one(buf);
}

/* An instance's unload removes DPP_PIN_ROOT when it leaves it empty (pin_dirs_remove()), so the
 * root can vanish between our mkdir of it and of the instance's directory in it: a component that
 * fails with ENOENT means that, and the whole path is made again. Once the instance's directory
 * exists the root is not empty and stays. */
#define MKDIR_P_TRIES 8

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	unsigned int tries = 0;
	int err;

	err = path_fmt(buf, sizeof(buf), "%s", path);
	if (err)
		return err;
	do
		err = mkdir_p_once(buf);
	while (err == -ENOENT && ++tries < MKDIR_P_TRIES);
	if (err)
		pr_warn("mkdir %s: %s", path, strerror(-err));
	return err;
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

/* The instance's directories below its pin directory (and next/, an upgrade's: pins_unstage). */
static const char *const pin_dirs[] = { "maps", "links", "progs" };

int pin_path(const struct dpp *d, char *buf, size_t sz, const char *sub, const char *leaf)
{
	if (leaf)
		return path_fmt(buf, sz, "%s/%s/%s", d->pin_dir, sub, leaf);
	return path_fmt(buf, sz, "%s/%s", d->pin_dir, sub);
}

int unlink_quiet(const char *path)
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

static void rmdir_quiet(const char *path)
{
	if (rmdir(path) && errno != ENOENT)
		pr_info("remove %s: %s", path, strerror(errno));
}

/* Remove next/, where an upgrade pins the new objects before it moves them over the old ones, and
 * whatever a failed or crashed upgrade left in it. */
int pins_unstage(const struct dpp *d)
{
	static const char *const staged[] = { "next/maps", "next/progs" };
	char path[PATH_MAX];
	unsigned int i;
	int err = 0, e;

	for (i = 0; i < sizeof(staged) / sizeof(staged[0]); i++) {
		e = pin_path(d, path, sizeof(path), staged[i], NULL);
		if (!e)
			e = dir_clear(path);
		if (e && !err)
			err = e;
	}
	e = pin_path(d, path, sizeof(path), "next/prog", NULL);
	if (!e)
		e = unlink_quiet(path);
	for (i = 0; i < sizeof(staged) / sizeof(staged[0]); i++) {
		if (!pin_path(d, path, sizeof(path), staged[i], NULL))
			rmdir_quiet(path);
	}
	if (!pin_path(d, path, sizeof(path), "next", NULL))
		rmdir_quiet(path);
	return err ?: e;
}

/* Undo pins_create(); also clears what a crashed load, upgrade or unload left behind. */
int pins_clear(struct dpp *d)
{
	char path[PATH_MAX];
	unsigned int i;
	int err, e;

	err = pin_path(d, path, sizeof(path), "prog", NULL);
	if (!err)
		err = unlink_quiet(path);
	e = links_drop_all(d);
	if (e && !err)
		err = e;
	for (i = 0; i < sizeof(pin_dirs) / sizeof(pin_dirs[0]); i++) {
		if (!strcmp(pin_dirs[i], "links"))
			continue; /* links_drop_all() unpinned them */
		e = pin_path(d, path, sizeof(path), pin_dirs[i], NULL);
		if (!e)
			e = dir_clear(path);
		if (e && !err)
			err = e;
	}
	e = pins_unstage(d);
	return err ?: e;
}

void pin_dirs_remove(struct dpp *d)
{
	char path[PATH_MAX];
	unsigned int i;

	for (i = 0; i < sizeof(pin_dirs) / sizeof(pin_dirs[0]); i++) {
		if (!pin_path(d, path, sizeof(path), pin_dirs[i], NULL))
			rmdir_quiet(path);
	}
	rmdir_quiet(d->pin_dir);
	/* The root too, when this was its last instance: an unload leaves nothing behind. Another
	 * instance's directory keeps it (ENOTEMPTY, quietly); one being made meanwhile makes it
	 * again (mkdir_p()). */
	if (rmdir(DPP_PIN_ROOT) && errno != ENOTEMPTY && errno != ENOENT)
		pr_info("remove %s: %s", DPP_PIN_ROOT, strerror(errno));
}

int pin_dir_make(const struct dpp *d, const char *sub)
{
	char path[PATH_MAX];
	int err;

	err = pin_path(d, path, sizeof(path), sub, NULL);
	return err ? err : mkdir_p(path);
}

/* Maps first, program last: the program pin is what marks the instance as complete. */
int pins_create(struct dpp *d)
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
	err = pin_dir_make(d, "maps");
	if (!err)
		err = pin_dir_make(d, "links");
	if (!err)
		err = pin_dir_make(d, "progs");
	if (!err)
		err = maps_pin(d);
	if (!err)
		err = progs_pin(d, &d->progs, "progs");
	if (!err)
		err = pin_path(d, path, sizeof(path), "prog", NULL);
	if (!err) {
		err = bpf_obj_pin(entry_fd(d), path);
		if (err)
			pr_warn("pin program at %s: %s", path, strerror(-err));
	}
	if (err) {
		pins_clear(d);
		pin_dirs_remove(d);
	}
	return err;
}

/* 1 when the named instance's program is pinned, 0 when not, else -errno. */
int instance_pinned(struct dpp *d, char *prog_path, size_t sz)
{
	int err;

	err = bpffs_ensure();
	if (!err)
		err = pin_path(d, prog_path, sz, "prog", NULL);
	if (err)
		return err;
	return path_exists(prog_path);
}
