// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Attaching: one XDP bpf_link per interface, pinned as links/<ifindex> when the instance is named,
 * so any process (the pins are the truth) can detach it. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/if_link.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

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
int link_live(int fd)
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
int links_scan(struct dpp *d)
{
	char dir[PATH_MAX], *end;
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
		fd = pin_open(dir, de->d_name, "link");
		if (fd < 0) {
			err = fd;
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

int links_drop_all(struct dpp *d)
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
	fd = bpf_link_create(entry_fd(d), ifindex, BPF_XDP, &lopts);
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
