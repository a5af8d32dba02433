// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* A pinned map's value type against the one a new build declares for it, from their BTF. Type,
 * key size, value size and entries are not enough to reuse a map: a struct changed at the same
 * size (a field moved, counters moved elsewhere) would be reused and its values misread without an
 * error. The types are compared by structure, not by id or name, which differ between builds:
 * typedefs and modifiers skipped; the same kind and size; structs and unions the same members
 * (names, bit offsets, bitfield sizes, types, recursively); arrays the same element type and
 * count; ints the same size, bits and encoding; enums and floats the same size. Pointers are not
 * followed: a value's pointer is a kernel pointer whose size is fixed.
 * One difference is taken, not refused: a member the map's struct names `reserved...` that the new
 * build names otherwise, at the same bit offset and an int of the same size (reserved_taken). That
 * is how a struct gains a field without an unpin; the field's first value is whatever the previous
 * build left in its reserved word, which the new build's writer must set before a program of the
 * new build reads it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "libdpp_internal.h"

/* Deeper than any value type of ours: no cycle is possible without a pointer, which is not
 * followed, so this only bounds a foreign object's nesting. */
#define BTF_DEPTH_MAX 32
#define BTF_PATH_MAX 192

/* The two sides being compared and where in the value they are ("" at the top, then 'a.b[]'). */
struct btf_walk {
	const struct btf *old;
	const struct btf *new;
	char path[BTF_PATH_MAX];
	char *why;
	size_t why_len;
};

static const char *const kind_names[] = {
	[BTF_KIND_UNKN] = "void",	 [BTF_KIND_INT] = "an int",	 [BTF_KIND_PTR] = "a pointer",
	[BTF_KIND_ARRAY] = "an array",	 [BTF_KIND_STRUCT] = "a struct", [BTF_KIND_UNION] = "a union",
	[BTF_KIND_ENUM] = "an enum",	 [BTF_KIND_FWD] = "a forward declaration",
	[BTF_KIND_FLOAT] = "a float",	 [BTF_KIND_ENUM64] = "a 64-bit enum",
};

static const char *kind_name(__u16 kind)
{
	if (kind < sizeof(kind_names) / sizeof(kind_names[0]) && kind_names[kind])
		return kind_names[kind];
	return "another kind";
}

/* The type id names once its typedefs and modifiers (const, volatile, ...) are skipped; NULL when
 * the id is not in btf or the chain does not end. */
static const struct btf_type *type_resolved(const struct btf *btf, __u32 id)
{
	const struct btf_type *t = btf__type_by_id(btf, id);
	int hops;

	for (hops = 0; t && hops < BTF_DEPTH_MAX; hops++) {
		if (!btf_is_typedef(t) && !btf_is_mod(t))
			return t;
		t = btf__type_by_id(btf, t->type);
	}
	return NULL;
}

/* Say what differs, about the member at w->path (or the value itself). Returns 1: differs. */
static int differ(struct btf_walk *w, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (w->path[0])
		n = snprintf(w->why, w->why_len, "member '%s' ", w->path);
	else
		n = snprintf(w->why, w->why_len, "the value ");
	if (n < 0 || (size_t)n >= w->why_len)
		return 1;
	va_start(ap, fmt);
	vsnprintf(w->why + n, w->why_len - n, fmt, ap);
	va_end(ap);
	return 1;
}

static int types_compare(struct btf_walk *w, __u32 old_id, __u32 new_id, int depth);

/* Extend the path by a member's name or an element's "[]"; returns the length to go back to. */
static size_t path_push(struct btf_walk *w, const char *suffix)
{
	size_t len = strlen(w->path);

	snprintf(w->path + len, sizeof(w->path) - len, "%s%s",
		 len && suffix[0] != '[' ? "." : "", suffix);
	return len;
}

/* Compare a member's or an element's types; the path is left at it when they differ. */
static int nested_compare(struct btf_walk *w, const char *suffix, __u32 old_id, __u32 new_id,
			  int depth)
{
	size_t len = path_push(w, suffix);
	int differs = types_compare(w, old_id, new_id, depth + 1);

	if (!differs)
		w->path[len] = '\0';
	return differs;
}

/* The old struct's member named as the new one's i-th; an anonymous member by its index. */
static const struct btf_member *member_match(const struct btf *btf, const struct btf_type *t,
					     const char *name, __u16 i)
{
	const struct btf_member *m = btf_members(t);
	__u16 j;

	if (!name[0])
		return btf__name_by_offset(btf, m[i].name_off)[0] ? NULL : &m[i];
	for (j = 0; j < btf_vlen(t); j++) {
		if (!strcmp(btf__name_by_offset(btf, m[j].name_off), name))
			return &m[j];
	}
	return NULL;
}

#define RESERVED_PREFIX "reserved"

/* The old struct's member at the new one's i-th place when the old names it reserved... and the
 * new build has another name for it: the same bit offset, both ints of one size (ints_compare then
 * holds them to the same bits and encoding), and no member of the new build still named as the old
 * one. NULL for anything else (an anonymous new member too), which stays a difference. */
static const struct btf_member *reserved_taken(const struct btf_walk *w, const struct btf_type *o,
					       const struct btf_type *n, __u16 i)
{
	const struct btf_member *om = btf_members(o), *nm = btf_members(n);
	const struct btf_type *ot, *nt;
	const char *old_name;
	__u16 j;

	if (!btf__name_by_offset(w->new, nm[i].name_off)[0])
		return NULL; /* an anonymous member takes no name's place */
	for (j = 0; j < btf_vlen(o); j++) {
		old_name = btf__name_by_offset(w->old, om[j].name_off);
		if (btf_member_bit_offset(o, j) != btf_member_bit_offset(n, i) ||
		    strncmp(old_name, RESERVED_PREFIX, strlen(RESERVED_PREFIX)))
			continue;
		ot = type_resolved(w->old, om[j].type);
		nt = type_resolved(w->new, nm[i].type);
		if (!ot || !nt || !btf_is_int(ot) || !btf_is_int(nt) || ot->size != nt->size ||
		    member_match(w->new, n, old_name, i))
			return NULL;
		return &om[j];
	}
	return NULL;
}

/* Structs and unions: the new build's members in order, each found in the old by name (or taken
 * from a reserved one, reserved_taken). */
static int members_compare(struct btf_walk *w, const struct btf_type *o, const struct btf_type *n,
			   int depth)
{
	const struct btf_member *nm = btf_members(n), *om;
	__u32 o_bit, n_bit;
	const char *name, *label;
	__u16 i, o_i;

	if (btf_vlen(o) != btf_vlen(n))
		return differ(w, "has %u members, the new build's %u", btf_vlen(o), btf_vlen(n));
	for (i = 0; i < btf_vlen(n); i++) {
		name = btf__name_by_offset(w->new, nm[i].name_off);
		label = name[0] ? name : "(anonymous)";
		om = member_match(w->old, o, name, i) ?: reserved_taken(w, o, n, i);
		n_bit = btf_member_bit_offset(n, i);
		if (!om)
			return differ(w, "has no member '%s', the new build's at bit %u", label,
				      n_bit);
		o_i = om - btf_members(o);
		o_bit = btf_member_bit_offset(o, o_i);
		if (o_bit != n_bit) {
			path_push(w, label);
			return differ(w, "at bit %u, the new build's at bit %u", o_bit, n_bit);
		}
		if (btf_member_bitfield_size(o, o_i) != btf_member_bitfield_size(n, i)) {
			path_push(w, label);
			return differ(w, "is a %u-bit field, the new build's %u-bit",
				      btf_member_bitfield_size(o, o_i), btf_member_bitfield_size(n, i));
		}
		if (nested_compare(w, label, om->type, nm[i].type, depth))
			return 1;
	}
	return 0;
}

static int ints_compare(struct btf_walk *w, const struct btf_type *o, const struct btf_type *n)
{
	if (o->size == n->size && btf_int_bits(o) == btf_int_bits(n) &&
	    btf_int_offset(o) == btf_int_offset(n) && btf_int_encoding(o) == btf_int_encoding(n))
		return 0;
	return differ(w, "is an int of %u bytes (%u bits, encoding %#x), the new build's of %u bytes "
		      "(%u bits, encoding %#x)", o->size, btf_int_bits(o), btf_int_encoding(o),
		      n->size, btf_int_bits(n), btf_int_encoding(n));
}

/* 0: the same layout; 1: not, said in w->why. */
static int types_compare(struct btf_walk *w, __u32 old_id, __u32 new_id, int depth)
{
	const struct btf_type *o, *n;

	if (depth > BTF_DEPTH_MAX)
		return differ(w, "is nested deeper than %d levels: not compared", BTF_DEPTH_MAX);
	o = type_resolved(w->old, old_id);
	n = type_resolved(w->new, new_id);
	if (!o || !n)
		return differ(w, "has a type the %s BTF does not resolve", o ? "new build's" : "map's");
	if (btf_kind(o) != btf_kind(n))
		return differ(w, "is %s, the new build's %s", kind_name(btf_kind(o)),
			      kind_name(btf_kind(n)));
	switch (btf_kind(n)) {
	case BTF_KIND_INT:
		return ints_compare(w, o, n);
	case BTF_KIND_ARRAY:
		if (btf_array(o)->nelems != btf_array(n)->nelems)
			return differ(w, "has %u elements, the new build's %u", btf_array(o)->nelems,
				      btf_array(n)->nelems);
		return nested_compare(w, "[]", btf_array(o)->type, btf_array(n)->type, depth);
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
	case BTF_KIND_FLOAT:
		if (o->size != n->size)
			return differ(w, "is %u bytes, the new build's %u", o->size, n->size);
		return btf_is_composite(n) ? members_compare(w, o, n, depth) : 0;
	default:
		return 0; /* pointers, forward declarations: the kind is all there is */
	}
}

/* 0: the value types are laid out alike; 1: not, the first difference said in why. */
static int btf_value_compare(const struct btf *old_btf, __u32 old_id, const struct btf *new_btf,
			     __u32 new_id, char *why, size_t why_len)
{
	struct btf_walk w = { .old = old_btf, .new = new_btf, .why = why, .why_len = why_len };

	why[0] = '\0';
	return types_compare(&w, old_id, new_id, 0);
}

/* The BTF a map was created with, loaded from the kernel once for all the maps that share it. */
static int kernel_btf_get(struct dpp_btf_cache *cache, __u32 id, const struct btf **out)
{
	struct btf *btf;

	if (cache->btf && cache->id == id) {
		*out = cache->btf;
		return 0;
	}
	btf = btf__load_from_kernel_by_id(id);
	if (!btf)
		return -errno;
	btf__free(cache->btf);
	cache->btf = btf;
	cache->id = id;
	*out = btf;
	return 0;
}

void btf_cache_free(struct dpp_btf_cache *cache)
{
	btf__free(cache->btf);
	cache->btf = NULL;
}

/* 0: the values of the map the kernel describes by info are laid out as the new object's map
 * declares (new_btf: that object's BTF), or either side has no BTF; 1: not, said in why; -errno
 * when the kernel's BTF could not be read. */
int map_btf_differs(const struct bpf_map *map, const struct btf *new_btf,
		    const struct bpf_map_info *info, struct dpp_btf_cache *cache, char *why,
		    size_t why_len)
{
	__u32 new_id = bpf_map__btf_value_type_id(map);
	const struct btf *old_btf = NULL;
	int err;

	/* A map without BTF (created by hand, or a prog array) has only its sizes to compare,
	 * which the caller did: there is no layout to tell apart. */
	if (!info->btf_id || !info->btf_value_type_id || !new_btf || !new_id)
		return 0;
	err = kernel_btf_get(cache, info->btf_id, &old_btf);
	if (err) {
		pr_warn("load the BTF of map %s: %s", bpf_map__name(map), strerror(-err));
		return err;
	}
	return btf_value_compare(old_btf, info->btf_value_type_id, new_btf, new_id, why, why_len);
}
