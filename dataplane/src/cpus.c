// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The CPU set STEER hands flows to: a CPUMAP queue, a capacity and a meter per CPU. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "libdpp_internal.h"

#define DPP_DEFAULT_QSIZE 2048
/* The kernel's CPUMAP queue limit since Linux 4.15 (cpu_map_update_elem), and the most a probe of
 * another kernel's limit tries. */
#define DPP_KNOWN_QSIZE_MAX 16384
#define DPP_PROBE_QSIZE_MAX (1U << 20)
#define DPP_NSEC_PER_SEC 1000000000ULL

const struct dpp_map_spec cpus_maps[] = {
	DPP_ARRAY_SPEC(DPP_MAP_CPUS, "dpp_cpus", BPF_MAP_TYPE_ARRAY, struct dpp_cpu),
	DPP_ARRAY_SPEC(DPP_MAP_CPU_METERS, "dpp_cpu_meters", BPF_MAP_TYPE_ARRAY,
		       struct dpp_cpu_meter),
	DPP_ARRAY_SPEC(DPP_MAP_CPU_MAP, "dpp_cpu_map", BPF_MAP_TYPE_CPUMAP, struct bpf_cpumap_val),
	{},
};

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
int cpus_rebudget(struct dpp *d, __u64 window_ns)
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
