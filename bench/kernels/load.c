// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Loads BPF objects into the running kernel the way the tests and the benchmarks do (libbpf's open
 * and load, every program of the object), once for every combination of the object's one-byte
 * load-time knobs (cfg_* in .rodata: each cuts paths in or out of the verifier's walk), and says on
 * stdout, a line per object and setting, then per program, whether the kernel took it:
 *
 *   object dpp.bpf.o cfg_trace=1 cfg_flow_cache=0: loaded
 *   program dpp.bpf.o dpp_xdp: loaded, 61234 instructions verified
 *   object dpp.bpf.o cfg_trace=0 cfg_flow_cache=0: refused (Permission denied) by dpp_xdp
 *   log dpp.bpf.o dpp_xdp: <the verifier's last lines, one per line>
 *
 * bench/kernels runs it in a virtual machine booted with another kernel (bench/kernels/init.sh);
 * the exit status is the number of loads refused. `-1` loads each object under its first setting
 * only (every knob 0): on a kernel libdpp refuses, what matters is why its verifier refuses too, and
 * 5.19's walks a million instructions of the pipeline, over a minute under TCG, before it gives up. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#define KNOB_PREFIX "cfg_"
#define MAX_KNOBS 8
#define LOG_SIZE (64u << 20) /* a refused program's log at level 1: its last lines must fit */
#define LOG_LINES 40	     /* the lines of it printed */

struct knob {
	const char *name;
	__u32 offset;
};

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The object's one-byte knobs: cfg_* variables of .rodata one byte wide. */
static int find_knobs(struct bpf_object *obj, struct knob *knobs)
{
	struct btf *btf = bpf_object__btf(obj);
	const struct btf_var_secinfo *var;
	const struct btf_type *sec;
	int id, n = 0, i;

	id = btf ? btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC) : -1;
	if (id < 0)
		return 0;
	sec = btf__type_by_id(btf, id);
	var = btf_var_secinfos(sec);
	for (i = 0; i < btf_vlen(sec) && n < MAX_KNOBS; i++, var++) {
		const char *name = btf__name_by_offset(btf, btf__type_by_id(btf, var->type)->name_off);

		if (var->size == 1 && !strncmp(name, KNOB_PREFIX, strlen(KNOB_PREFIX)))
			knobs[n++] = (struct knob){ name, var->offset };
	}
	return n;
}

/* Bit i of `setting` is knob i's value. */
static void set_knobs(struct bpf_object *obj, const struct knob *knobs, int n, unsigned int setting)
{
	struct bpf_map *rodata = bpf_object__find_map_by_name(obj, ".rodata");
	size_t size;
	__u8 *data;
	int i;

	/* Writable until the load (libbpf's own copy); libbpf 1.1 declares it const. */
	data = rodata ? (__u8 *)bpf_map__initial_value(rodata, &size) : NULL;
	for (i = 0; data && i < n; i++)
		data[knobs[i].offset] = (setting >> i) & 1;
}

static void print_setting(const char *object, const struct knob *knobs, int n, unsigned int setting)
{
	int i;

	printf("object %s", object);
	for (i = 0; i < n; i++)
		printf(" %s=%u", knobs[i].name, (setting >> i) & 1);
	printf(":");
}

/* The last LOG_LINES lines of a verifier's log, each prefixed "log OBJECT PROGRAM: ". */
static void print_log_tail(const char *object, const char *prog, char *log)
{
	char *line, *start = log + strlen(log);
	int lines = 0;

	while (start > log && lines <= LOG_LINES)
		if (*--start == '\n')
			lines++;
	if (*start == '\n')
		start++;
	for (line = strtok(start, "\n"); line; line = strtok(NULL, "\n"))
		printf("log %s %s: %s\n", object, prog, line);
}

static void print_loaded(const char *object, struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (!bpf_program__autoload(prog))
			continue;
		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			memset(&info, 0, sizeof(info));
		printf("program %s %s: loaded, %u instructions verified\n", object,
		       bpf_program__name(prog), info.verified_insns);
	}
}

/* The program the load stopped at, from libbpf's warning (it unloads every program on a failure,
 * so no descriptor tells): "libbpf: prog 'NAME': BPF program load failed: ...". */
static char refused[128];

static int note_refusal(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char msg[512];
	const char *name;
	size_t len;

	if (level != LIBBPF_WARN)
		return 0;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	fputs(msg, stderr);
	if (!strstr(msg, "BPF program load failed") || !(name = strstr(msg, "prog '")))
		return 0;
	name += strlen("prog '");
	len = strcspn(name, "'");
	if (len >= sizeof(refused))
		len = sizeof(refused) - 1;
	snprintf(refused, sizeof(refused), "%.*s", (int)len, name);
	return 0;
}

/* One load of `path` under `setting`; 0 when the kernel took every program. */
static int load_once(const char *path, unsigned int setting, char *log)
{
	const char *object = base_name(path);
	struct knob knobs[MAX_KNOBS];
	struct bpf_program *prog;
	struct bpf_object *obj;
	int n, err;

	obj = bpf_object__open_file(path, NULL);
	if (!obj) {
		printf("object %s: not opened (%s)\n", object, strerror(errno));
		return 1;
	}
	n = find_knobs(obj, knobs);
	set_knobs(obj, knobs, n, setting);
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_log_buf(prog, log, LOG_SIZE);
	log[0] = '\0';
	refused[0] = '\0';
	err = bpf_object__load(obj);
	print_setting(object, knobs, n, setting);
	if (!err) {
		printf(" loaded\n");
		print_loaded(object, obj);
	} else {
		printf(" refused (%s) by %s\n", strerror(-err), refused[0] ? refused : "libbpf");
		print_log_tail(object, refused[0] ? refused : "-", log);
	}
	bpf_object__close(obj);
	return err ? 1 : 0;
}

static unsigned int settings_of(const char *path)
{
	struct knob knobs[MAX_KNOBS];
	struct bpf_object *obj;
	int n;

	obj = bpf_object__open_file(path, NULL);
	if (!obj)
		return 1;
	n = find_knobs(obj, knobs);
	bpf_object__close(obj);
	return 1u << n;
}

int main(int argc, char **argv)
{
	unsigned int setting, settings;
	int refused = 0, first = 1, i;
	bool first_setting_only;
	char *log;

	first_setting_only = argc > 1 && !strcmp(argv[1], "-1");
	if (first_setting_only)
		first++;
	if (argc <= first) {
		fprintf(stderr, "usage: %s [-1] OBJECT.bpf.o...\n", argv[0]);
		return 2;
	}
	log = malloc(LOG_SIZE);
	if (!log)
		return 2;
	libbpf_set_print(note_refusal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = first; i < argc; i++) {
		settings = first_setting_only ? 1 : settings_of(argv[i]);
		for (setting = 0; setting < settings; setting++)
			refused += load_once(argv[i], setting, log);
	}
	free(log);
	return refused;
}
