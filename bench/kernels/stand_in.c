// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Pins a stand-in instance where libdpp would pin one (PIN_DIR: /sys/fs/bpf/dpp/NAME), on a kernel
 * where libdpp loads none: every map of the pipeline's object, with its type and sizes, and a
 * small XDP program as the entry. `dppctl upgrade` then opens the instance from its pins as it
 * opens a running one and reaches dpp_upgrade, whose own kernel check must refuse the new
 * programs (bench/kernels/init.sh, on a kernel libdpp's check refuses: older than 6.1).
 *
 *   stand-in PIN_DIR PIPELINE.bpf.o ENTRY.bpf.o
 *
 * The maps are made one by one, without BTF (libdpp compares a map without BTF by its sizes
 * alone): libbpf's own load of the object would fill the program array from programs that this
 * kernel cannot load. Exit status 0 when every pin is made, 1 otherwise, with the reason on stderr. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static int fail(const char *what, const char *name, int err)
{
	fprintf(stderr, "stand-in: %s %s: %s\n", what, name, strerror(err < 0 ? -err : err));
	return 1;
}

/* A map as the object declares it; a map of maps with its inner map made first. */
static int map_create(struct bpf_map *map)
{
	struct bpf_map *inner = bpf_map__inner_map(map);
	LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = bpf_map__map_flags(map),
		    .map_extra = bpf_map__map_extra(map));
	int fd, inner_fd = -1;

	if (inner) {
		LIBBPF_OPTS(bpf_map_create_opts, inner_opts, .map_flags = bpf_map__map_flags(inner));

		inner_fd = bpf_map_create(bpf_map__type(inner), NULL, bpf_map__key_size(inner),
					  bpf_map__value_size(inner), bpf_map__max_entries(inner),
					  &inner_opts);
		if (inner_fd < 0)
			return inner_fd;
		opts.inner_map_fd = inner_fd;
	}
	fd = bpf_map_create(bpf_map__type(map), bpf_map__name(map), bpf_map__key_size(map),
			    bpf_map__value_size(map), bpf_map__max_entries(map), &opts);
	if (inner_fd >= 0)
		close(inner_fd);
	return fd;
}

static int maps_pin(const char *dir, const char *path)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	char pin[PATH_MAX];
	struct bpf_map *map;
	int fd, err = 0;

	if (!obj)
		return fail("open", path, errno);
	bpf_object__for_each_map(map, obj) {
		if (bpf_map__is_internal(map))
			continue;
		snprintf(pin, sizeof(pin), "%s/maps/%s", dir, bpf_map__name(map));
		fd = map_create(map);
		if (fd < 0) {
			err = fail("create map", bpf_map__name(map), fd);
			break;
		}
		if (bpf_obj_pin(fd, pin))
			err = fail("pin map at", pin, errno);
		close(fd);
		if (err)
			break;
	}
	bpf_object__close(obj);
	return err;
}

/* The object's first program, loaded and pinned as the instance's entry (DIR/prog). */
static int entry_pin(const char *dir, const char *path)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	char pin[PATH_MAX];
	int err;

	if (!obj)
		return fail("open", path, errno);
	snprintf(pin, sizeof(pin), "%s/prog", dir);
	err = bpf_object__load(obj);
	if (err)
		err = fail("load", path, err);
	else if (bpf_obj_pin(bpf_program__fd(bpf_object__next_program(obj, NULL)), pin))
		err = fail("pin program at", pin, errno);
	bpf_object__close(obj);
	return err;
}

int main(int argc, char **argv)
{
	char maps[PATH_MAX];

	if (argc != 4) {
		fprintf(stderr, "usage: %s PIN_DIR PIPELINE.bpf.o ENTRY.bpf.o\n", argv[0]);
		return 2;
	}
	snprintf(maps, sizeof(maps), "%s/maps", argv[1]);
	if ((mkdir(argv[1], 0700) && errno != EEXIST) || (mkdir(maps, 0700) && errno != EEXIST))
		return fail("make", maps, errno);
	return maps_pin(argv[1], argv[2]) || entry_pin(argv[1], argv[3]);
}
