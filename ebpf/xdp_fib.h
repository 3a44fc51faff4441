/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * xdp_fib.h: the fast path's IPv4 FIB, included by xdp_router.c (after
 * struct route_val): crates/fib's DIR-16-8-8 trie with controlled prefix
 * expansion and leaf pushing in BPF arrays, written by user space through
 * an mmap with the same update code as the user-space FIB
 * (crates/fast/src/fib.rs, crates/fib/src/expand.rs).
 *
 * An entry (u32) is 0 (no route), FIB_EXT | group index, or a leaf:
 * (prefix length + 1) << 23 | next hop id (an index into fib_hops). A
 * table's root is 65,536 entries, indexed by the address's top 16 bits;
 * a group 256, indexed by the next 8 bits. At most three dependent loads
 * of 4 bytes and the next hop's, where the LPM trie this replaced walked a
 * node per bit-level (a cache miss each with 512K prefixes).
 *
 * User space fills a new group before it stores its index in the parent
 * entry, and replaces each entry with one 32-bit store: a frame sees the
 * old or the new route of its address, never a mix. Groups, table slots
 * and next hop ids given up are reused 50 ms later, when no run that read
 * them can still be going.
 */
#ifndef XDP_FIB_H
#define XDP_FIB_H

/* The FIB's arrays (sizes set by the loader: tables x 256 and groups
 * values). A value is 256 entries: an array's values are laid out every
 * round_up(value size, 8) bytes, so u32 values would leave a hole after
 * each in the mapping user space writes. */
#define FIB_GROUP 256

struct fib_group {
	__u32 e[FIB_GROUP];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_group);
} fib_root SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fib_group);
} fib_groups SEC(".maps");

/* Next hop id -> route value. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct route_val);
} fib_hops SEC(".maps");

#define FIB_EXT (1u << 31)
#define FIB_NH_MASK ((1u << 23) - 1)

/* Entry `i` (< FIB_GROUP) of value `v` of a FIB array, read once (user
 * space rewrites it under the program's feet); 0 (no route) past the
 * array's end. */
static __always_inline __u32 fib_entry(void *map, __u32 v, __u32 i)
{
	struct fib_group *g = bpf_map_lookup_elem(map, &v);

	return g ? *(volatile __u32 *)&g->e[i & (FIB_GROUP - 1)] : 0;
}

/* Longest-prefix match of addr in table slot `slot`: the root entry (the
 * slot's 256 values, by the top 8 and the next 8 bits), then up to two
 * groups; NULL: no route. */
static __always_inline struct route_val *fib_lookup(__u32 slot, __be32 addr)
{
	__u32 a = bpf_ntohl(addr);
	__u32 e = fib_entry(&fib_root, (slot << 8) | (a >> 24), a >> 16);

	if (e & FIB_EXT)
		e = fib_entry(&fib_groups, e & ~FIB_EXT, a >> 8);
	if (e & FIB_EXT)
		e = fib_entry(&fib_groups, e & ~FIB_EXT, a);
	if (e == 0 || (e & FIB_EXT))
		return NULL;
	__u32 hop = e & FIB_NH_MASK;

	return bpf_map_lookup_elem(&fib_hops, &hop);
}

#endif
