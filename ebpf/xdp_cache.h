// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * xdp_cache.h: per-CPU caches of the select table and the neighbours
 * (included by xdp_router.c, after its maps). A hash map lookup is the
 * costliest step of a frame's forward (a helper call, a jhash, a bucket
 * walk and a key compare: about 20 ns each here, measured with
 * `vrhost bench fastpath --experiments cost`), and a frame made up to
 * three (the select table with the exact key, then without the MAC; the
 * neighbour). Frames of one port and tenant, to one next hop, come in
 * runs: each CPU keeps the last answers and checks them against the
 * frame's key before using one.
 *
 * Validity: `fast_switch` (xdp_router.c) holds a generation per table,
 * which user space (crates/fast/src/cache.rs) raises after each change
 * of that table (each an atomic 8-byte store of its own through user
 * space's mapping of the array, so a reader sees the old or the new
 * value). A cached answer carries the generation read before
 * the lookup that made it, plus one (0: empty), and is used only while
 * that is still the table's: a change is seen by every CPU from its next
 * frame that reads the raised generation on, as a frame already past its
 * lookup would have used the old entry anyway.
 *
 * What is cached: a select entry's {vr, path} for the frame's exact key
 * {port, VLAN, destination MAC} (whichever entry matched it), only for an
 * entry without a token bucket (one with a bucket is looked up each
 * frame, as the bucket's state lives in the entry); SEL_WAYS slots by a
 * hash of the key, so a few tenants interleaved on one CPU keep theirs.
 * The last neighbour {vr, ip} -> neigh_val looked up.
 */

#define GEN_SELECT 0
#define GEN_NEIGHBOURS 1
#define SEL_WAYS 4

struct sel_cached {
	__u64 gen;		/* the select generation + 1; 0: empty */
	__u32 ifindex;
	__u32 vlan_mac01;	/* the key's VLAN and MAC bytes 0, 1 */
	__u32 mac25;		/* MAC bytes 2..5 */
	__u32 vr;
	__u32 path;
	__u32 pad;
};

struct neigh_cached {
	__u64 gen;		/* the neighbour generation + 1; 0: empty */
	struct vr_ip key;
	struct neigh_val val;
};

struct fast_cache {
	struct sel_cached sel[SEL_WAYS];
	struct neigh_cached neigh;
};

_Static_assert(sizeof(struct sel_cached) == 32, "sel_cached");
_Static_assert(sizeof(struct fast_cache) == 4 * 32 + 32, "fast_cache");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fast_cache);
} fast_cache SEC(".maps");

/* A table's generation + 1 (what a cached answer made now carries), read
 * once (user space stores it under the program's feet). */
static __always_inline __u64 gen_now(const struct fast_switch *sw, __u32 table)
{
	return *(volatile const __u64 *)&sw->gen[table & 1] + 1;
}

/* The select key's last 8 bytes as two words. */
static __always_inline void key_words(const struct select_key *k, __u32 *a, __u32 *b)
{
	__builtin_memcpy(a, (const __u8 *)k + 4, 4);
	__builtin_memcpy(b, (const __u8 *)k + 8, 4);
}

/* The slot of `k` in the select cache. */
static __always_inline struct sel_cached *sel_slot(struct fast_cache *fc,
						   const struct select_key *k)
{
	__u32 i = (k->ifindex ^ k->dst_mac[5] ^ k->vlan) & (SEL_WAYS - 1);

	return &fc->sel[i];
}

/* {vr, path} of `k` from the cache: 1 if there (gen: select's now). */
static __always_inline int sel_get(struct sel_cached *s, const struct select_key *k,
				   __u64 gen, __u32 *vr, __u32 *path)
{
	__u32 a, b;

	key_words(k, &a, &b);
	if (gen == 0 || s->gen != gen || s->ifindex != k->ifindex ||
	    s->vlan_mac01 != a || s->mac25 != b)
		return 0;
	*vr = s->vr;
	*path = s->path;
	return 1;
}

static __always_inline void sel_put(struct sel_cached *s, const struct select_key *k,
				    __u64 gen, __u32 vr, __u32 path)
{
	__u32 a, b;

	key_words(k, &a, &b);
	s->gen = gen;
	s->ifindex = k->ifindex;
	s->vlan_mac01 = a;
	s->mac25 = b;
	s->vr = vr;
	s->path = path;
}
