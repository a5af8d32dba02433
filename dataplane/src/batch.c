// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Batched map writes, in chunks, falling back to one syscall per element where the kernel or the
 * map type has no batch operations. */
#include <errno.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

/* The kernel's internal ENOTSUPP leaks to userspace from batch ops on maps that lack them. */
#define DPP_ENOTSUPP 524

bool batch_unsupported(int err)
{
	return err == -EINVAL || err == -DPP_ENOTSUPP || err == -EOPNOTSUPP;
}

/* Per element, for kernels or map types without batch ops. *done counts what was applied. */
static int update_each(int fd, const char *keys, size_t ksz, const char *vals, size_t vsz, __u32 n,
		       __u64 flags, __u32 *done)
{
	__u32 i;
	int err = 0;

	for (i = 0; i < n; i++) {
		err = bpf_map_update_elem(fd, keys + i * ksz, vals + i * vsz, flags);
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
__u32 batch_progress(int err, __u32 requested, __u32 reported)
{
	if (err && reported >= requested)
		return 0;
	return reported;
}

static int update_chunk(int fd, const char *keys, size_t ksz, const char *vals, size_t vsz,
			__u32 n, __u64 flags, __u32 *done)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bopts, .elem_flags = flags);
	__u32 cnt = n;
	int err;

	err = bpf_map_update_batch(fd, keys, vals, &cnt, &bopts);
	cnt = batch_progress(err, n, cnt);
	if (err && !cnt && batch_unsupported(err))
		return update_each(fd, keys, ksz, vals, vsz, n, flags, done);
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

/* vals NULL: delete keys; else update them with flags (BPF_ANY, BPF_NOEXIST, BPF_EXIST). Applies
 * in order, in chunks; *done is what was applied. */
int batch_apply(int fd, const void *keys, size_t ksz, const void *vals, size_t vsz, __u32 n,
		__u64 flags, __u32 *done)
{
	const char *k = keys, *v = vals;
	__u32 off = 0, cnt, got;
	int err = 0;

	while (off < n) {
		cnt = n - off < DPP_BATCH_CHUNK ? n - off : DPP_BATCH_CHUNK;
		got = 0;
		if (vals)
			err = update_chunk(fd, k + off * ksz, ksz, v + off * vsz, vsz, cnt, flags,
					   &got);
		else
			err = delete_chunk(fd, k + off * ksz, ksz, cnt, &got);
		off += got;
		if (err)
			break;
	}
	*done = off;
	return err;
}
