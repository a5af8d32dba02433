// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The instance's programs: the XDP entry, which the links run, and the programs it tail-calls
 * through the slots of dpp_progs. Taken from the loaded object, or reopened from the pins (prog
 * for the entry, progs/<name> for the others); which slot holds which program is read from
 * dpp_progs itself, the one truth the entry follows. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

/* Own fd (closed on failure) as the table's next program; the entry goes first. */
static int prog_add(struct dpp_prog_table *t, const char *name, int fd)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	struct dpp_prog_desc *p;
	bool entry = !strcmp(name, DPP_ENTRY_PROG);
	int err;

	err = bpf_obj_get_info_by_fd(fd, &info, &len);
	if (!err && info.type != BPF_PROG_TYPE_XDP) {
		pr_warn("program %s is type %u, not XDP", name, info.type);
		err = -EPROTO;
	}
	if (!err && t->nr == DPP_PROGS_MAX) {
		pr_warn("more than %d programs in the BPF object", DPP_PROGS_MAX);
		err = -E2BIG;
	}
	if (!err && strlen(name) >= sizeof(p->name))
		err = -ENAMETOOLONG;
	if (err) {
		close(fd);
		return err;
	}
	if (entry && t->nr)
		t->progs[t->nr] = t->progs[0];
	p = &t->progs[entry ? 0 : t->nr];
	t->nr++;
	*p = (struct dpp_prog_desc){ .id = info.id, .fd = fd, .slot = -1 };
	p->kind = entry ? DPP_PROG_KIND_XDP : DPP_PROG_KIND_TAIL;
	if (!strcmp(name, DPP_CPUMAP_PROG))
		p->kind = DPP_PROG_KIND_CPUMAP;
	if (!strcmp(name, DPP_DEVMAP_PROG) || !strcmp(name, DPP_DUP_DEVMAP_PROG) ||
	    !strncmp(name, DPP_DEVMAP_PROG_PREFIX, strlen(DPP_DEVMAP_PROG_PREFIX)))
		p->kind = DPP_PROG_KIND_DEVMAP;
	snprintf(p->name, sizeof(p->name), "%s", name);
	return 0;
}

/* Each slot of dpp_progs names a program by id: mark it in the table. */
static int progs_slots_read(struct dpp_prog_table *t, int slots_fd)
{
	struct bpf_map_info info = {};
	__u32 len = sizeof(info), slot, id;
	int i, err;

	err = bpf_obj_get_info_by_fd(slots_fd, &info, &len);
	if (err)
		return err;
	for (slot = 0; slot < info.max_entries; slot++) {
		if (bpf_map_lookup_elem(slots_fd, &slot, &id))
			continue; /* an empty slot */
		for (i = 0; i < t->nr; i++) { /* the entry too: FRER's stage hands frames back to it */
			if (t->progs[i].id == id)
				t->progs[i].slot = (__s32)slot;
		}
	}
	return 0;
}

static int prog_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dpp_prog_desc *)a)->name, ((const struct dpp_prog_desc *)b)->name);
}

/* The entry first, the others by name: the loaded object and a reopened instance's pins (whose
 * directory lists them in no set order) give one list. */
static int table_check(struct dpp_prog_table *t)
{
	if (t->nr && t->progs[0].kind == DPP_PROG_KIND_XDP) {
		qsort(t->progs + 1, t->nr - 1, sizeof(t->progs[0]), prog_name_cmp);
		return 0;
	}
	pr_warn("no program %s, the XDP entry", DPP_ENTRY_PROG);
	return -ENOENT;
}

int progs_collect_loaded(struct dpp_prog_table *t, struct bpf_object *obj, int slots_fd)
{
	struct bpf_program *prog;
	int fd, err;

	bpf_object__for_each_program(prog, obj) {
		fd = fcntl(bpf_program__fd(prog), F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		err = prog_add(t, bpf_program__name(prog), fd);
		if (err)
			return err;
	}
	err = table_check(t);
	if (!err)
		err = progs_slots_read(t, slots_fd);
	return err;
}

static int pinned_prog_add(struct dpp_prog_table *t, const char *dir, const char *name,
			   const char *pinned_as)
{
	int fd = pin_open(dir, pinned_as, "program");

	return fd < 0 ? fd : prog_add(t, name, fd);
}

/* The entry from its pin, then progs/ (absent when an older build pinned the instance). */
int progs_collect_pinned(struct dpp *d)
{
	char dir[PATH_MAX];
	struct dpp_map_ref *slots;
	struct dirent *de;
	int err;
	DIR *dh;

	err = pinned_prog_add(&d->progs, d->pin_dir, DPP_ENTRY_PROG, "prog");
	if (!err)
		err = pin_path(d, dir, sizeof(dir), "progs", NULL);
	if (err)
		return err;
	dh = opendir(dir);
	if (!dh && errno != ENOENT)
		return -errno;
	while (dh && (de = readdir(dh))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, DPP_ENTRY_PROG))
			continue;
		err = pinned_prog_add(&d->progs, dir, de->d_name, de->d_name);
		if (err)
			break;
	}
	if (dh)
		closedir(dh);
	if (!err)
		err = table_check(&d->progs);
	slots = map_find(d, DPP_SLOTS_MAP);
	if (!err && slots)
		err = progs_slots_read(&d->progs, slots->fd);
	return err;
}

/* Own fd (closed on failure) as the table's program `name`, loaded after the others (a program the
 * instance's pins lacked, dpp_program_add), the list kept in its order. */
int progs_adopt(struct dpp_prog_table *t, const char *name, int fd)
{
	int err = prog_add(t, name, fd);

	return err ? err : table_check(t);
}

/* Pin every program but the entry (whose pin, prog, marks a complete instance) as <sub>/<name>. */
int progs_pin(const struct dpp *d, const struct dpp_prog_table *t, const char *sub)
{
	char path[PATH_MAX];
	int i, err;

	for (i = 1; i < t->nr; i++) {
		err = pin_path(d, path, sizeof(path), sub, t->progs[i].name);
		if (!err)
			err = bpf_obj_pin(t->progs[i].fd, path);
		if (err) {
			pr_warn("pin program %s: %s", t->progs[i].name, strerror(-err));
			return err;
		}
	}
	return 0;
}

void progs_close(struct dpp_prog_table *t)
{
	while (t->nr)
		close(t->progs[--t->nr].fd);
}

int dpp_programs(const struct dpp *d, struct dpp_prog_desc *out, int max)
{
	int i;

	if (!d || (max > 0 && !out))
		return -EINVAL;
	for (i = 0; i < d->progs.nr && i < max; i++)
		out[i] = d->progs.progs[i];
	return d->progs.nr;
}
