// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * xdp_router.c: vrhost's fast path, the built-in IPv4 router's forwarding
 * in XDP (crates/fast, which loads it and owns its maps).
 *
 * One loaded program, attached to every port and shared by every VR (its
 * maps hold all of them, keyed by VR id): the select table says, for
 * each tenant's frames, whether they go to the VR's user-space instance
 * (the slow path, through the AF_XDP socket of the port's rx queue), are
 * forwarded here (the fast path), or are dropped. The fast path is an
 * accelerator of a VR, not a router of its own: whatever it cannot do
 * (ARP, ICMP errors, frames for the router itself, a route or neighbour
 * miss, IP options, a bad checksum, TTL <= 1, group addresses, VLAN tags)
 * goes to the slow path, where the same VR's user-space router handles and
 * counts it as it does today.
 *
 * Per frame:
 *  0. A tunnel frame (VXLAN or UDP to a tunnel's local endpoint on its
 *     underlay port; xdp_tunnel.h) has its outer headers checked and
 *     stripped and goes on as a frame of the tunnel's vNIC (the select key's
 *     port is TUN_IFINDEX | tunnel id); a bad or unknown one goes to the
 *     slow path untouched. A stripped frame that then goes to the slow
 *     path gets its outer headers back first. A neighbour on a tunnel vNIC
 *     is reached by pushing the tunnel's outer headers and redirecting to
 *     its underlay port.
 *  1. Ethernet, and at most one 802.1Q tag, read to build the select key
 *     {ingress ifindex, VLAN id (0xffff untagged, as the host's classifier
 *     packs it), destination MAC}. `select` is looked up with the exact
 *     key, then with the MAC zeroed (a rule on the port, or port and VLAN,
 *     without a MAC). No entry: slow path (the host classifies the frame as
 *     it does now), counted in `unselected`. This key carries the
 *     classifier's layer-2 rules (crates/host/src/classify.rs: in_port,
 *     dst_mac, vlan), which is how tenants share a port; its prefix,
 *     protocol and UDP port rules would need a key per rule kind (a
 *     tuple space, as the classifier compiles them) and stay in the host:
 *     such tenants have no entry here and keep the slow path.
 *     The entry's {vr, path} comes from this CPU's cache of the frame's
 *     exact key when the entry has no bucket and the table has not changed
 *     since (xdp_cache.h); the next hop's neighbour likewise.
 *  2. The entry's token bucket (if rate_pps > 0) admits the frame or drops
 *     it (drop_rate_limit): per-tenant fairness at the port, before the
 *     frame costs anything more. Then path DROP: dropped (drop_select);
 *     SLOW: slow path (to_slow_select); FAST: on.
 *  3. FAST, as crates/router: IPv4, untagged, IHL 5 (options -> slow),
 *     lengths (bad -> drop_bad_header), header checksum (bad -> slow, which
 *     counts it), source no host may have (drop_bad_header), group MAC or
 *     multicast/class E/broadcast destination (slow), one of the VR's own
 *     addresses (in `vrs`, or `addrs` past 5; slow), route lookup by the
 *     VR's mode (`vrs`):
 *       dst:     the FIB {table `vrs`[vr].table, dst}
 *       src:     the FIB {table `vrs`[vr].table, src}
 *       src-dst: `src_tables` {vr, 0, src} gives a table, then the FIB
 *                {that table, dst}; no fallback to another table
 *                (crates/fib/src/policy.rs)
 *     miss -> slow (the user-space router counts it and sends ICMP net
 *     unreachable); TTL <= 1 -> slow (it sends time exceeded); the route's
 *     next hop (its gateway, or the destination for a connected route) in
 *     `neighbours` {vr, ip} -> {dst MAC, src MAC, out ifindex}, miss ->
 *     slow (user space resolves ARP); the out port in `out_ports`, miss ->
 *     slow. Then TTL - 1 with the incremental checksum of RFC 1624, MACs
 *     rewritten, XDP_REDIRECT through `out_ports`.
 *     Fragments are forwarded as the router does (only those addressed to
 *     the router itself go to slow, with every other frame for it).
 *
 * Maps (sizes set by the loader from its config):
 *  select      HASH    select_key -> select_entry: tenant -> VR, path,
 *                      token bucket
 *  vrs         ARRAY   (mmapable) vr id -> vr_conf: routing mode,
 *                      fast-capable flag, 1 + the FIB table slot of its
 *                      table 0 (0: none), the VR's own addresses when it
 *                      has at most VR_INLINE_ADDRS (the common case: one
 *                      per vNIC)
 *  addrs       HASH    {vr, ip} -> 1: the VR's own addresses, looked up
 *                      only for a VR with more than VR_INLINE_ADDRS
 *  fib_*: the FIB, crates/fib's DIR-16-8-8 trie in arrays (xdp_fib.h):
 *  fib_root    ARRAY   (mmapable) the FIB's root level: 65,536 u32 entries
 *                      per table (a {VR, table} has a table slot), indexed
 *                      by the address's top 16 bits (256 values of 256)
 *  fib_groups  ARRAY   (mmapable) the FIB's groups of 256 u32 entries
 *                      (a value each), shared by all tables, indexed by
 *                      the next 8 bits
 *  fib_hops    ARRAY   next hop id -> route_val
 *  src_tables  LPM     {prefixlen, vr, 0, src} -> table slot (src-dst
 *                      mode); prefixlen = 64 + the prefix length: vr and
 *                      table are always matched whole. Small (a few
 *                      source prefixes per VR): it stays a trie
 *  neighbours  HASH    {vr, ip} -> neigh_val
 *  out_ports   DEVMAP_HASH  ifindex -> ifindex: the ports frames leave by
 *  xsk_ports   HASH    ifindex -> {base, queues}: where the port's queues
 *                      start in `xsks` (one program serves every port, and
 *                      rx queue numbers repeat from port to port)
 *  xsks        XSKMAP  base + rx queue -> AF_XDP socket: the slow path
 *  counters    PERCPU_ARRAY vr id -> fast_counters (summed by user space)
 *  unselected  PERCPU_ARRAY [0] -> frames without a select entry
 *  fast_switch ARRAY   (mmapable) [0] -> what every frame reads: the
 *                      generations of fast_cache, whether tunnels are
 *                      set, the CPUs the forwarding is spread over
 *                      (ncpus 0: none, forwarded in place)
 *  cpu_map     CPUMAP  cpu -> queue running xdp_router_cpu
 *  tun_locals, tun_in, tunnels, tun_stats: the tunnels (xdp_tunnel.h)
 *  fast_cache  PERCPU_ARRAY each CPU's cached answers from select and
 *                      neighbours, valid while fast_switch's generation
 *                      of their table is (xdp_cache.h)
 *
 * Spreading (fast_switch.ncpus > 0; `FastPath::spread`): a frame the fast
 * path forwards is decided and rewritten here as above, its out port put
 * in 4 bytes of XDP metadata, and it is redirected through `cpu_map` to
 * one of the CPUs (by a hash of its addresses, so a flow keeps one CPU and
 * its order), where `xdp_router_cpu` redirects it to the out port. The
 * transmit, and on veth the peer's receive that the transmit schedules,
 * then run on that CPU instead of the port's receiving one (on veth, the
 * sender's: the generator's core). Everything that may go to the slow
 * path is decided before, here: an AF_XDP socket takes frames of its own
 * port's queue only. A frame the CPU's queue has no room for is dropped
 * by the kernel (its xdp:xdp_cpumap_enqueue tracepoint counts it).
 *
 * Concurrency: counters are per CPU (no atomics). The token bucket lives
 * in the shared `select` value and is updated without a lock or atomics:
 * CPUs running it for one tenant at the same moment can take the same
 * token or add the same refill, so it over-admits, by at most what the
 * racing CPUs took or added at once; it never admits less than its rate.
 * A CPU whose clock read is older than the refill time another CPU just
 * wrote adds nothing (not a wrapped "a second idle"). Rates are at most
 * 10^10 pps and bursts 10^10 frames (the loader refuses more), so
 * elapsed (< 1 s) * rate and tokens + added stay below 2^64. User space
 * replacing an entry keeps its bucket's tokens and refill time
 * (crates/fast/src/bucket.rs).
 * An rx queue is served by one CPU at a time, so a tenant whose frames
 * arrive on one queue is limited exactly.
 * A VR's vr_conf is written field by field (one atomic store each,
 * through user space's mapping of the array): a frame on another CPU at
 * that moment may see part of the old and part of the new (its own
 * addresses among them), as it may see the addrs hash half updated, one
 * address at a time.
 *
 * veth: a frame redirected into a veth is delivered only if the veth's
 * peer has an XDP program attached (or GRO on, which gives it NAPI);
 * `xdp_pass` below is for that.
 *
 * Loops: none (the header checksum's ten words are unrolled). The verifier
 * of kernel 6.18 accepts it: 9666 instructions verified with the tunnels
 * of xdp_tunnel.h, before the own addresses moved into vr_conf (aya's
 * ProgramInfo::verified_instruction_count; the
 * figure noted before them was 973), far below the verifier's limit of
 * 10^6. crates/fast's tests load it each run.
 *
 * Licence: "Dual MIT/GPL", as xdp_redirect.c: the kernel refuses
 * GPL-only helpers to programs without a GPL-compatible licence.
 *
 * Built by crates/fast/build.rs with
 *   clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define PATH_SLOW 0
#define PATH_FAST 1
#define PATH_DROP 2

#define MODE_DST 0
#define MODE_SRC 1
#define MODE_SRC_DST 2

#define VLAN_NONE 0xffff
#define ETH_P_8021Q_ 0x8100
#define ROUTE_CONNECTED 1
#define NS_PER_SEC 1000000000ULL

/* The layouts below are mirrored by crates/fast/src/abi.rs; the sizes are
 * checked on both sides (here, and there by aya against this object's map
 * definitions when the maps are opened). */

struct select_key {
	__u32 ifindex;
	__u16 vlan;		/* host order; VLAN_NONE untagged */
	__u8 dst_mac[6];	/* all zero: any MAC (the second lookup) */
};

struct select_entry {
	__u32 vr;
	__u32 path;		/* PATH_* */
	__u64 rate_pps;		/* 0: no limit */
	__u64 burst;
	__u64 tokens;
	__u64 last_ns;
};

#define VR_INLINE_ADDRS 5

struct vr_conf {
	__u32 mode;		/* MODE_* */
	__u32 fast;		/* 0: not set up for the fast path: slow */
	/* 1 + the FIB's table slot of the VR's table 0 (0: none; dst and src
	 * modes), written by the FIB alone (crates/fast/src/vrconf.rs). */
	__u32 table;
	/* The VR's own addresses: up to VR_INLINE_ADDRS all here (addrs is
	 * not looked up), more only in addrs. */
	__u32 naddrs;
	__be32 addr[VR_INLINE_ADDRS];
	__u32 pad;
};

struct lpm_key {
	__u32 prefixlen;	/* 64 + prefix length */
	__u32 vr;
	__u32 table;
	__be32 addr;
};

struct route_val {
	__be32 gateway;		/* the next hop; ignored if connected */
	__u32 flags;		/* ROUTE_CONNECTED: the destination is the neighbour */
};

struct vr_ip {
	__u32 vr;
	__be32 addr;
};

struct neigh_val {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 ifindex;
};

struct xsk_slot {
	__u32 base;		/* the port's first index in xsks */
	__u32 queues;		/* its indexes: base .. base + queues */
};

struct fast_counters {
	__u64 rx;			/* frames selected to this VR */
	__u64 fwd;			/* redirected to an out port (a failed
					 * transmit after the program returns,
					 * e.g. a veth whose peer has no XDP
					 * program, is not seen here) */
	__u64 to_slow_select;		/* path SLOW, or VR not fast-capable */
	__u64 to_slow_not_ip;		/* ARP, other ethertypes, VLAN tagged */
	__u64 to_slow_options;		/* IHL > 5 */
	__u64 to_slow_bad_checksum;
	__u64 to_slow_group;		/* group MAC, multicast/class E/broadcast dst */
	__u64 to_slow_local;		/* one of the VR's own addresses */
	__u64 to_slow_no_route;
	__u64 to_slow_ttl;		/* TTL <= 1 */
	__u64 to_slow_no_neighbour;
	__u64 to_slow_no_port;		/* out ifindex not in out_ports */
	__u64 drop_select;		/* path DROP */
	__u64 drop_rate_limit;		/* token bucket empty */
	__u64 drop_bad_header;		/* truncated, not v4, bad lengths, bad source */
	__u64 reserved;
};

_Static_assert(sizeof(struct select_key) == 12, "select_key: abi.rs");
_Static_assert(sizeof(struct select_entry) == 40, "select_entry: abi.rs");
_Static_assert(sizeof(struct vr_conf) == 40, "vr_conf: abi.rs");
_Static_assert(sizeof(struct lpm_key) == 16, "lpm_key: abi.rs");
_Static_assert(sizeof(struct route_val) == 8, "route_val: abi.rs");
_Static_assert(sizeof(struct vr_ip) == 8, "vr_ip: abi.rs");
_Static_assert(sizeof(struct neigh_val) == 16, "neigh_val: abi.rs");
_Static_assert(sizeof(struct xsk_slot) == 8, "xsk_slot: abi.rs");
_Static_assert(sizeof(struct fast_counters) == 128, "fast_counters: abi.rs");

#define MAX_FAST_CPUS 15

/* What every frame reads besides its own entries, in one value (one
 * lookup, one cache line for the per-frame words): the generations of
 * the select table and the neighbours (xdp_cache.h), whether any tunnel
 * is set (xdp_tunnel.h), and the CPUs forwarding is spread over. User
 * space writes it through its mapping of the (mmapable) array, each field
 * with one atomic store of its own and never the whole value
 * (crates/fast/src/cache.rs), so a frame reads each field's old or new
 * value, and one writer's store cannot undo another's. */
struct fast_switch {
	__u64 gen[2];		/* GEN_SELECT, GEN_NEIGHBOURS */
	__u32 tunnels;		/* how many tunnels are set (0: none looked up) */
	__u32 ncpus;		/* the spread's CPUs (0: forwarded in place) */
	__u32 cpu[MAX_FAST_CPUS];
	__u32 pad;
};

_Static_assert(sizeof(struct fast_switch) == 88, "fast_switch: abi.rs");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct fast_switch);
} fast_switch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct select_key);
	__type(value, struct select_entry);
} select SEC(".maps");

/* Mmapable: user space stores each field on its own (vrconf.rs). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct vr_conf);
} vrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct vr_ip);
	__type(value, __u32);
} addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, __u32);
} src_tables SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct vr_ip);
	__type(value, struct neigh_val);
} neighbours SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} out_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct xsk_slot);
} xsk_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct fast_counters);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} unselected SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpu_map SEC(".maps");

/* What spread() did when it did not hand the frame over. */
#define SPREAD_OFF -1		/* the redirect target is untouched */
#define SPREAD_FAILED -2	/* it may have been changed: set it again */

/* Spreading on: hand the rewritten frame, its out port in the metadata, to
 * one of the switch's CPUs by a hash of its addresses. SPREAD_OFF:
 * spreading off; SPREAD_FAILED: no room for the metadata or a CPU missing
 * from cpu_map: redirect in place. */
static __always_inline int spread(struct xdp_md *ctx, const struct fast_switch *sw,
				  __u32 ifindex, __u32 hash)
{
	__u32 count = sw->ncpus;

	if (count == 0 || count > MAX_FAST_CPUS)
		return SPREAD_OFF;
	__u32 i = hash % count;

	/* The compiler knows i < count <= MAX_FAST_CPUS and would drop the
	 * check; the verifier does not know it: hide i from the compiler. */
	asm volatile("" : "+r"(i));
	if (i >= MAX_FAST_CPUS)
		return SPREAD_OFF;
	__u32 cpu = sw->cpu[i];

	if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(__u32)))
		return SPREAD_OFF;
	void *data = (void *)(long)ctx->data;
	__u32 *meta = (void *)(long)ctx->data_meta;

	if ((void *)(meta + 1) > data)
		return SPREAD_OFF;
	*meta = ifindex;
	/* A CPU missing from cpu_map: redirect in place. */
	if (bpf_redirect_map(&cpu_map, cpu, XDP_PASS) != XDP_REDIRECT)
		return SPREAD_FAILED;
	return XDP_REDIRECT;
}

/* The slow path: the AF_XDP socket of the frame's port and rx queue, or
 * the kernel stack (XDP_PASS) when there is none. */
static __always_inline int to_slow(struct xdp_md *ctx)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 queue = ctx->rx_queue_index;
	struct xsk_slot *s = bpf_map_lookup_elem(&xsk_ports, &ifindex);

	if (!s || queue >= s->queues)
		return XDP_PASS;
	return (int)bpf_redirect_map(&xsks, s->base + queue, XDP_PASS);
}

/* Take one token from the entry's bucket; 0 if it is empty. Lock-free and
 * approximate across CPUs (see the header). */
static __always_inline int take_token(struct select_entry *e)
{
	__u64 rate = e->rate_pps;

	if (rate == 0)
		return 1;
	__u64 now = bpf_ktime_get_ns();
	__u64 last = e->last_ns;

	if (now <= last) {
		/* Another CPU read the clock after this one and already moved
		 * last_ns past it: nothing to add (now - last would wrap and
		 * look like a second idle, a full bucket). */
	} else if (now - last >= NS_PER_SEC) {
		/* A second or more idle (or a fresh entry): a full bucket. Also
		 * keeps elapsed * rate below 2^64 in the other branch for any
		 * rate below 2^34 pps. */
		e->tokens = e->burst;
		e->last_ns = now;
	} else {
		__u64 add = (now - last) * rate / NS_PER_SEC;

		if (add > 0) {
			__u64 t = e->tokens + add;

			e->tokens = t < e->burst ? t : e->burst;
			/* Advance by the time the tokens took, not to now, so
			 * fractions of a token are not lost. */
			e->last_ns = last + add * NS_PER_SEC / rate;
		}
	}
	if (e->tokens == 0)
		return 0;
	e->tokens -= 1;
	return 1;
}

#include "xdp_ttl.h"

/* The folded one's-complement sum of an option-less header's ten words. */
static __always_inline __u16 header_sum(const struct iphdr *ip)
{
	const __u16 *w = (const __u16 *)ip;
	__u32 sum = 0;

#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* The header checksum of an option-less header is valid. */
static __always_inline int checksum_ok(const struct iphdr *ip)
{
	return header_sum(ip) == 0xffff;
}

/* Whether daddr is one of the VR's own addresses: compared with those in
 * its vr_conf, the hash map only for a VR with more. */
static __always_inline int own_addr(const struct vr_conf *conf, __u32 vr, __be32 daddr)
{
	__u32 n = conf->naddrs;

	if (n <= VR_INLINE_ADDRS) {
#pragma unroll
		for (int i = 0; i < VR_INLINE_ADDRS; i++)
			if (i < n && conf->addr[i] == daddr)
				return 1;
		return 0;
	}
	struct vr_ip own = { .vr = vr, .addr = daddr };

	return bpf_map_lookup_elem(&addrs, &own) != NULL;
}

#include "xdp_fib.h"

/* Route lookup by the VR's mode; NULL: no route. */
static __always_inline struct route_val *route(const struct vr_conf *conf, __u32 vr,
					       __u32 mode, __be32 src, __be32 dst)
{
	switch (mode) {
	case MODE_DST:
	case MODE_SRC: {
		/* Read once: the FIB stores it under the program's feet. */
		__u32 t = *(volatile const __u32 *)&conf->table;

		if (t == 0)
			return NULL;
		return fib_lookup(t - 1, mode == MODE_DST ? dst : src);
	}
	case MODE_SRC_DST: {
		struct lpm_key k = { .prefixlen = 96, .vr = vr, .table = 0, .addr = src };
		__u32 *t = bpf_map_lookup_elem(&src_tables, &k);

		if (!t)
			return NULL;
		return fib_lookup(*t, dst);
	}
	default:
		return NULL;
	}
}

#include "xdp_tunnel.h"
#include "xdp_cache.h"

SEC("xdp")
int xdp_router(struct xdp_md *ctx)
{
	struct select_key sk = { .ifindex = ctx->ingress_ifindex, .vlan = VLAN_NONE };
	__u32 zero = 0;
	/* The per-frame switches: the array's one value, always there (an
	 * array's values are; the check is the verifier's). */
	const struct fast_switch *sw = bpf_map_lookup_elem(&fast_switch, &zero);

	if (!sw)
		return to_slow(ctx);
	/* A tunnel frame: its outer headers stripped (undo bytes), and sk's
	 * port the tunnel vNIC's (xdp_tunnel.h). */
	int undo = tun_decap(ctx, sw, &sk.ifindex);

	if (undo < 0)
		return to_slow(ctx);
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u16 proto;
	int tagged = 0;

	if ((void *)(eth + 1) > end) {
		__u64 *n = bpf_map_lookup_elem(&unselected, &zero);

		if (n)
			*n += 1;
		return slow(ctx, undo);
	}
	proto = eth->h_proto;
	if (proto == bpf_htons(ETH_P_8021Q_)) {
		__be16 *tag = (void *)(eth + 1);

		if ((void *)(tag + 2) > end)
			goto unselected;
		sk.vlan = bpf_ntohs(tag[0]) & 0x0fff;
		proto = tag[1];
		tagged = 1;
	}
	__builtin_memcpy(sk.dst_mac, eth->h_dest, 6);

	/* The select entry's {vr, path}: from this CPU's cache (xdp_cache.h)
	 * for an entry without a bucket, else looked up (and cached). */
	struct fast_cache *fc = bpf_map_lookup_elem(&fast_cache, &zero);
	struct sel_cached *sc = fc ? sel_slot(fc, &sk) : NULL;
	__u64 sgen = gen_now(sw, GEN_SELECT);
	struct select_entry *e = NULL;
	__u32 vr, path;

	if (!sc || !sel_get(sc, &sk, sgen, &vr, &path)) {
		e = bpf_map_lookup_elem(&select, &sk);
		if (!e) {
			struct select_key any = sk;

			__builtin_memset(any.dst_mac, 0, 6);
			e = bpf_map_lookup_elem(&select, &any);
		}
		if (!e)
			goto unselected;
		vr = e->vr;
		path = e->path;
		if (sc && e->rate_pps == 0)
			sel_put(sc, &sk, sgen, vr, path);
	}
	struct fast_counters *c = bpf_map_lookup_elem(&counters, &vr);

	/* A VR id past the counters array: the loader refuses such entries;
	 * slow path rather than forwarding uncounted. */
	if (!c)
		return slow(ctx, undo);
	c->rx += 1;
	/* Not looked up: a cached entry, which has no bucket. */
	if (e && !take_token(e)) {
		c->drop_rate_limit += 1;
		return XDP_DROP;
	}
	if (path == PATH_DROP) {
		c->drop_select += 1;
		return XDP_DROP;
	}
	struct vr_conf *conf = bpf_map_lookup_elem(&vrs, &vr);

	if (path != PATH_FAST || !conf || !conf->fast) {
		c->to_slow_select += 1;
		return slow(ctx, undo);
	}
	if (tagged || proto != bpf_htons(ETH_P_IP)) {
		c->to_slow_not_ip += 1;
		return slow(ctx, undo);
	}

	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end || ip->version != 4 || ip->ihl < 5) {
		c->drop_bad_header += 1;
		return XDP_DROP;
	}
	if (ip->ihl != 5) {
		c->to_slow_options += 1;
		return slow(ctx, undo);
	}
	__u16 tot = bpf_ntohs(ip->tot_len);

	if (tot < sizeof(*ip) || (void *)ip + tot > end) {
		c->drop_bad_header += 1;
		return XDP_DROP;
	}
	if (!checksum_ok(ip)) {
		c->to_slow_bad_checksum += 1;
		return slow(ctx, undo);
	}
	/* 0.0.0.0, multicast, class E and broadcast are no host's address
	 * (RFC 1812 5.3.7): 0 wraps to the top of the range. */
	if (bpf_ntohl(ip->saddr) - 1 >= 0xdfffffff) {
		c->drop_bad_header += 1;
		return XDP_DROP;
	}
	/* Group frames and group or broadcast destinations are for the
	 * router as a host (RFC 1812 5.3.4). */
	if (bpf_ntohl(ip->daddr) >= 0xe0000000 || (eth->h_dest[0] & 1)) {
		c->to_slow_group += 1;
		return slow(ctx, undo);
	}
	if (own_addr(conf, vr, ip->daddr)) {
		c->to_slow_local += 1;
		return slow(ctx, undo);
	}
	struct route_val *r = route(conf, vr, conf->mode, ip->saddr, ip->daddr);

	if (!r) {
		c->to_slow_no_route += 1;
		return slow(ctx, undo);
	}
	if (ip->ttl <= 1) {
		c->to_slow_ttl += 1;
		return slow(ctx, undo);
	}
	struct vr_ip hop = {
		.vr = vr,
		.addr = (r->flags & ROUTE_CONNECTED) ? ip->daddr : r->gateway,
	};
	/* This CPU's last neighbour if it is this one (xdp_cache.h). */
	__u64 ngen = gen_now(sw, GEN_NEIGHBOURS);
	struct neigh_val *n;

	if (fc && ngen && fc->neigh.gen == ngen && fc->neigh.key.vr == hop.vr &&
	    fc->neigh.key.addr == hop.addr) {
		n = &fc->neigh.val;
	} else {
		n = bpf_map_lookup_elem(&neighbours, &hop);
		if (!n) {
			c->to_slow_no_neighbour += 1;
			return slow(ctx, undo);
		}
		if (fc && ngen) {
			fc->neigh.gen = ngen;
			fc->neigh.key = hop;
			fc->neigh.val = *n;
		}
	}
	if (n->ifindex & TUN_IFINDEX)
		return tun_encap(ctx, sw, c, n, undo);
	/* Set the redirect target before touching the frame: a port not in
	 * out_ports leaves it unchanged for the slow path. */
	if (bpf_redirect_map(&out_ports, n->ifindex, 0) != XDP_REDIRECT) {
		c->to_slow_no_port += 1;
		return slow(ctx, undo);
	}
	decrement_ttl(ip);
	__builtin_memcpy(eth->h_dest, n->dst_mac, 6);
	__builtin_memcpy(eth->h_source, n->src_mac, 6);
	c->fwd += 1;
	__u32 h = ip->saddr ^ ip->daddr;

	h ^= h >> 16;
	int s = spread(ctx, sw, n->ifindex, h ^ (h >> 8));

	if (s >= 0)
		return s;
	/* Spreading off: the target set above stands (no second lookup of
	 * out_ports per frame). */
	if (s == SPREAD_OFF)
		return XDP_REDIRECT;
	/* The frame is intact (its metadata moved, at most), but `spread`
	 * set another redirect target. */
	return (int)bpf_redirect_map(&out_ports, n->ifindex, 0);

unselected: {
		__u64 *n = bpf_map_lookup_elem(&unselected, &zero);

		if (n)
			*n += 1;
		return slow(ctx, undo);
	}
}

/* On a CPU of fast_switch.cpu, from cpu_map: the frame xdp_router rewrote, to
 * the out port in its metadata. */
SEC("xdp/cpumap")
int xdp_router_cpu(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	__u32 *meta = (void *)(long)ctx->data_meta;

	if ((void *)(meta + 1) > data)
		return XDP_DROP;
	return (int)bpf_redirect_map(&out_ports, *meta, 0);
}

/* XDP_PASS: for the peer of a veth that the fast path redirects into.
 * A veth delivers frames redirected to it (ndo_xdp_xmit) only when its
 * peer runs an XDP program (or has GRO on, which enables its NAPI);
 * attaching this to the peer makes that so without changing what it
 * receives. */
SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
