// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * xdp_tunnel.h: tunnel vNICs in the fast path (included by xdp_router.c,
 * after its maps and counters). VXLAN, plain UDP and IP-in-IP over IPv4,
 * as the user-space path does them (crates/host/src/tunnel.rs,
 * crates/packet/src/tunnel.rs): the same outer headers byte for byte.
 *
 * A tunnel has an id (0 .. TUN_MAX); the fast path sees its vNIC as the
 * port TUN_IFINDEX | id: select keys of the vNIC's tenant and neighbours
 * out of it carry that ifindex.
 *
 * In (tun_decap, before the select table): an untagged, option-less IPv4
 * UDP frame whose {ingress port, destination address, destination port}
 * is in `tun_locals` is a tunnel frame. Its outer headers are checked as
 * OuterV4::parse and VxlanHeader do (lengths, checksum, not a fragment, the
 * I flag), the tunnel found in `tun_in` by {port, local, remote, UDP port,
 * VNI}, and the outer headers stripped with bpf_xdp_adjust_head: the inner
 * frame then goes through the select table as a frame of port
 * TUN_IFINDEX | id. IP-in-IP (protocol 4 to a `tun_locals` entry with UDP
 * port 0): the outer IPv4 header is stripped and an Ethernet header made
 * up for the inner packet as the host's tunnel table makes it ({the
 * tunnel's inner_mac, the outer source MAC, IPv4}), over the outer
 * header's last 14 bytes, which `tun_saved` keeps for a restore.
 * Anything else about a tunnel frame (a bad outer
 * header, an unknown VNI, padding after the UDP payload, a kind the fast
 * path does not decapsulate) goes to the slow path unchanged, where the
 * user-space tunnel table counts it by reason; `tun_stats` counts it here.
 * A decapsulated frame that the pipeline then hands to the slow path gets
 * its outer headers back (bpf_xdp_adjust_head by minus as much: the bytes
 * are still there, nothing wrote them but IP-in-IP's made-up header, whose
 * 14 bytes are written back from `tun_saved`), so the slow path sees the
 * frame as it arrived. A valid frame teaches the tunnel its peer MAC (the outer
 * source MAC) when none is configured (TUN_LEARN), as Encap::learn does.
 *
 * Out (tun_encap, for a neighbour whose ifindex is a tunnel's): the peer
 * MAC known (else slow, which holds the frame's fate: tunnel_no_mac) and
 * the underlay port in out_ports (else slow), the router's rewrite of the
 * inner frame, then the outer Ethernet, IPv4 (DF clear, TTL 64, an
 * identification from the tunnel's counter, the checksum), UDP (source
 * port from the inner flow's hash as vrhost_host::balance::flow_hash and
 * flow_src_port compute it, checksum 0) and VXLAN headers pushed with
 * bpf_xdp_adjust_head, and a redirect to the underlay port. IP-in-IP: the
 * inner frame's Ethernet header is replaced by the outer Ethernet and IPv4
 * (protocol 4) headers.
 *
 * Maps:
 *  tun_locals  HASH   {port, local, UDP port} -> kind: frames for a tunnel
 *  tun_in      HASH   {port, local, remote, UDP port, VNI} -> tunnel id
 *  tunnels     ARRAY  id -> struct tunnel (kind 0: none)
 *  tun_stats   PERCPU_ARRAY tunnel id -> struct tun_counters of that
 *              tunnel; [TUN_MAX]: of frames of no tunnel (a bad outer
 *              header before the tunnel is known, an unknown tunnel)
 *  tun_saved   PERCPU_ARRAY [0] -> the bytes IP-in-IP decapsulation wrote
 *              over, and the tunnel a frame was decapsulated from
 *  (fast_switch.tunnels, xdp_router.c: how many tunnels are set; 0: none
 *  looked up)
 */

#define TUN_IFINDEX 0x80000000u
#define TUN_MAX 4096
#define TUN_KIND_VXLAN 1
#define TUN_KIND_UDP 2
#define TUN_KIND_IPIP 3
#define TUN_PEER_KNOWN 1
#define TUN_LEARN 2
#define TUN_OUTER_TTL 64
#define VXLAN_FLAG_I 0x08
/* Ethernet 14 + IPv4 20 + UDP 8 (+ VXLAN 8); IP-in-IP: the outer IPv4
 * header in place of the inner Ethernet header. */
#define UDP_OVERHEAD 42
#define VXLAN_OVERHEAD 50
#define IPIP_HEADERS 34
#define IPIP_UNDO 20

struct tun_local_key {
	__u32 ifindex;
	__be32 local;
	__u16 udp_port;		/* host order */
	__u16 pad;
};

struct tun_in_key {
	__u32 ifindex;
	__be32 local;
	__be32 remote;
	__u16 udp_port;		/* host order */
	__u16 pad;
	__u32 vni;		/* 0 but for VXLAN */
};

struct tunnel {
	__u32 kind;		/* TUN_KIND_*; 0: no tunnel */
	__u32 vni;
	__be32 local;
	__be32 remote;
	__u32 ifindex;		/* the underlay port */
	__u16 udp_port;		/* host order */
	__u8 local_mac[6];	/* outer source MAC */
	__u8 peer_mac[6];	/* outer destination MAC, if TUN_PEER_KNOWN */
	__u16 flags;		/* TUN_PEER_KNOWN, TUN_LEARN */
	__u32 ident;		/* the last outer IPv4 identification sent */
	__u8 inner_mac[6];	/* IP-in-IP: the destination MAC of the
				 * Ethernet header made up for an inner packet */
	__u16 pad;
};

struct tun_counters {
	__u64 decap;		/* decapsulated (then the select table's) */
	__u64 encap;		/* encapsulated and redirected */
	__u64 to_slow_bad_outer;	/* lengths, checksum, fragment, flags, padding */
	__u64 to_slow_unknown;	/* no tunnel of that VNI and addresses */
	__u64 to_slow_no_mac;	/* peer MAC not known yet */
	__u64 to_slow_restored;	/* decapsulated, then for the slow path */
	__u64 drop_headroom;	/* no headroom for the outer headers */
	__u64 reserved;
};

_Static_assert(sizeof(struct tun_local_key) == 12, "tun_local_key: abi.rs");
_Static_assert(sizeof(struct tun_in_key) == 20, "tun_in_key: abi.rs");
_Static_assert(sizeof(struct tunnel) == 48, "tunnel: abi.rs");
_Static_assert(sizeof(struct tun_counters) == 64, "tun_counters: abi.rs");

/* IP-in-IP decapsulation writes the made-up Ethernet header over the
 * outer IPv4 header's last 14 bytes: kept here (per CPU, for the one
 * program run) to put back if the frame goes to the slow path. */
struct tun_saved {
	__u8 bytes[14];
	__u16 valid;
	__u32 tid;		/* the tunnel of the frame decapsulated last */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TUN_MAX);
	__type(key, struct tun_local_key);
	__type(value, __u32);
} tun_locals SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TUN_MAX);
	__type(key, struct tun_in_key);
	__type(value, __u32);
} tun_in SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TUN_MAX);
	__type(key, __u32);
	__type(value, struct tunnel);
} tunnels SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TUN_MAX + 1);
	__type(key, __u32);
	__type(value, struct tun_counters);
} tun_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tun_saved);
} tun_saved SEC(".maps");

/* The counters of tunnel `tid`; TUN_MAX (or any id past it): those of
 * frames of no tunnel. */
static __always_inline struct tun_counters *tun_count(__u32 tid)
{
	__u32 k = tid < TUN_MAX ? tid : TUN_MAX;

	return bpf_map_lookup_elem(&tun_stats, &k);
}

/* Count a frame decapsulated from tunnel `tid`, and note the tunnel for
 * slow() should the frame go there. */
static __always_inline void tun_decapped(__u32 tid)
{
	__u32 zero = 0;
	struct tun_counters *tc = tun_count(tid);
	struct tun_saved *sv = bpf_map_lookup_elem(&tun_saved, &zero);

	if (tc)
		tc->decap += 1;
	if (sv)
		sv->tid = tid;
}

/* `a * b` to 128 bits, halves folded by xor (the host's folded_mul), in
 * 32-bit halves: BPF has no 128-bit product. */
static __always_inline __u64 folded_mul(__u64 a, __u64 b)
{
	__u64 al = a & 0xffffffff, ah = a >> 32, bl = b & 0xffffffff, bh = b >> 32;
	__u64 ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	__u64 mid = (ll >> 32) + (lh & 0xffffffff) + (hl & 0xffffffff);
	__u64 lo = (ll & 0xffffffff) | (mid << 32);
	__u64 hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);

	return lo ^ hi;
}

/* vrhost_host::balance::flow_hash of an untagged, option-less IPv4 frame
 * (the only ones the fast path forwards), then flow_src_port's scaling
 * into 32768..=60999. */
static __always_inline __u16 tun_src_port(const struct iphdr *ip, void *end)
{
	__u64 sport = 0, dport = 0;
	int fragment = (bpf_ntohs(ip->frag_off) & 0x3fff) != 0;
	const __u8 *p = (const void *)(ip + 1);

	if ((ip->protocol == 6 || ip->protocol == 17) && !fragment &&
	    (void *)(p + 4) <= end) {
		sport = (__u64)p[0] << 8 | p[1];
		dport = (__u64)p[2] << 8 | p[3];
	}
	__u64 a = (__u64)bpf_ntohl(ip->saddr) << 16 | sport;
	__u64 b = (__u64)bpf_ntohl(ip->daddr) << 16 | dport;
	__u64 lo = a < b ? a : b, hi = a < b ? b : a;
	__u64 h = folded_mul(lo ^ 0x243F6A8885A308D3ULL,
			     hi ^ ((__u64)ip->protocol << 48) ^ 0x13198A2E03707344ULL);
	__u32 hash = (__u32)(h ^ (h >> 32));

	return (__u16)((((__u64)hash * (60999 - 32768 + 1)) >> 32) + 32768);
}

/* Strip the outer headers of a tunnel frame for the fast path. Returns
 * the bytes stripped (> 0) with *ifindex set to the tunnel vNIC's, 0 for a
 * frame that is no tunnel's (untouched), -1 for a tunnel frame the slow
 * path must take (untouched, counted). */
static __always_inline int tun_decap_ipip(struct xdp_md *ctx, __u32 *ifindex);

/* sw->tunnels (xdp_router.c's fast_switch): how many tunnels are set. 0:
 * no frame is looked up in tun_locals (a word of the value every frame
 * reads anyway, instead of a hash lookup per UDP frame on a host without
 * tunnels). */
static __always_inline int tun_decap(struct xdp_md *ctx, const struct fast_switch *sw,
				     __u32 *ifindex)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__be16 *udp = (void *)(ip + 1);

	if (sw->tunnels == 0)
		return 0;
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5)
		return 0;
	if (ip->protocol == 4)
		return tun_decap_ipip(ctx, ifindex);
	if ((void *)(udp + 4) > end || ip->protocol != 17)
		return 0;
	struct tun_local_key lk = {
		.ifindex = *ifindex, .local = ip->daddr, .udp_port = bpf_ntohs(udp[1]),
	};
	__u32 *kind = bpf_map_lookup_elem(&tun_locals, &lk);

	if (!kind)
		return 0;
	struct tun_counters *tc = tun_count(TUN_MAX);

	if (!tc)
		return -1;
	__u16 tot = bpf_ntohs(ip->tot_len);
	__u16 ulen = bpf_ntohs(udp[2]);
	int over = *kind == TUN_KIND_VXLAN ? VXLAN_OVERHEAD : UDP_OVERHEAD;

	/* The inner frame must end where the frame does (no padding: the
	 * slow path could not get it back after a trim). */
	if (ip->version != 4 || tot < 20 + 8 || ulen != tot - 20 ||
	    (void *)ip + tot != end || (bpf_ntohs(ip->frag_off) & 0x3fff) ||
	    !checksum_ok(ip) || ulen < over - 34 + ETH_HLEN)
		goto bad;
	struct tun_in_key ik = {
		.ifindex = *ifindex, .local = ip->daddr, .remote = ip->saddr,
		.udp_port = lk.udp_port,
	};
	if (*kind == TUN_KIND_VXLAN) {
		__u8 *vx = (void *)(udp + 4);

		if ((void *)(vx + 8) > end || !(vx[0] & VXLAN_FLAG_I))
			goto bad;
		ik.vni = (__u32)vx[4] << 16 | (__u32)vx[5] << 8 | vx[6];
	} else if (*kind != TUN_KIND_UDP) {
		goto bad;
	}
	__u32 *id = bpf_map_lookup_elem(&tun_in, &ik);

	if (!id) {
		tc->to_slow_unknown += 1;
		return -1;
	}
	__u32 tid = *id;
	struct tunnel *t = bpf_map_lookup_elem(&tunnels, &tid);

	if (!t || t->kind != *kind)
		goto bad;
	if (t->flags & TUN_LEARN) {
		__builtin_memcpy(t->peer_mac, eth->h_source, 6);
		t->flags |= TUN_PEER_KNOWN;
	}
	if (bpf_xdp_adjust_head(ctx, over))
		goto bad;
	tun_decapped(tid);
	*ifindex = TUN_IFINDEX | tid;
	return over;
bad:
	tc->to_slow_bad_outer += 1;
	return -1;
}

/* tun_decap for an IPv4 protocol 4 frame: the inner IPv4 packet behind
 * an Ethernet header made up as the host's TunnelTable makes it ({the
 * tunnel's inner_mac, the outer source MAC, IPv4}), written over the
 * outer IPv4 header's last 14 bytes, which tun_saved keeps. */
static __always_inline int tun_decap_ipip(struct xdp_md *ctx, __u32 *ifindex)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct iphdr *in = (void *)(ip + 1);
	__u32 zero = 0;

	if ((void *)(in + 1) > end)
		return 0;
	struct tun_local_key lk = { .ifindex = *ifindex, .local = ip->daddr };

	if (!bpf_map_lookup_elem(&tun_locals, &lk))
		return 0;
	struct tun_counters *tc = tun_count(TUN_MAX);
	struct tun_saved *sv = bpf_map_lookup_elem(&tun_saved, &zero);

	if (!tc || !sv)
		return -1;
	__u16 tot = bpf_ntohs(ip->tot_len);

	if (ip->version != 4 || (void *)ip + tot != end ||
	    (bpf_ntohs(ip->frag_off) & 0x3fff) || !checksum_ok(ip) ||
	    in->version != 4)
		goto bad;
	struct tun_in_key ik = {
		.ifindex = *ifindex, .local = ip->daddr, .remote = ip->saddr,
	};
	__u32 *id = bpf_map_lookup_elem(&tun_in, &ik);

	if (!id) {
		tc->to_slow_unknown += 1;
		return -1;
	}
	__u32 tid = *id;
	struct tunnel *t = bpf_map_lookup_elem(&tunnels, &tid);

	if (!t || t->kind != TUN_KIND_IPIP)
		goto bad;
	__u8 peer[6];

	__builtin_memcpy(peer, eth->h_source, 6);
	if (t->flags & TUN_LEARN) {
		__builtin_memcpy(t->peer_mac, peer, 6);
		t->flags |= TUN_PEER_KNOWN;
	}
	__builtin_memcpy(sv->bytes, (__u8 *)in - 14, 14);
	sv->valid = 1;
	if (bpf_xdp_adjust_head(ctx, IPIP_UNDO))
		goto bad;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	/* Always true (the inner packet is 20 bytes or more), for the
	 * verifier; were it not, the pipeline finds no Ethernet header and
	 * hands the frame, restored, to the slow path. */
	if ((void *)(eth + 1) <= end) {
		__builtin_memcpy(eth->h_dest, t->inner_mac, 6);
		__builtin_memcpy(eth->h_source, peer, 6);
		eth->h_proto = bpf_htons(ETH_P_IP);
	}
	tun_decapped(tid);
	*ifindex = TUN_IFINDEX | tid;
	return IPIP_UNDO;
bad:
	tc->to_slow_bad_outer += 1;
	return -1;
}

/* The outer IPv4 header's checksum, written. */
static __always_inline void tun_fill_checksum(struct iphdr *ip)
{
	ip->check = 0;
	ip->check = (__u16)~header_sum(ip);
}

/* Write the outer headers of tunnel `t` in front of an inner frame (or
 * IP-in-IP packet) of `inner` bytes, at `data` (`over` bytes up to it,
 * checked against `end` by the caller). */
static __always_inline void tun_write_outer(void *data, struct tunnel *t, int over,
					    __u16 inner, __u16 sport)
{
	struct ethhdr *oe = data;
	struct iphdr *oi = (void *)(oe + 1);
	__be16 *ou = (void *)(oi + 1);
	__u16 iplen = over - ETH_HLEN + inner;
	int ipip = t->kind == TUN_KIND_IPIP;

	__builtin_memcpy(oe->h_dest, t->peer_mac, 6);
	__builtin_memcpy(oe->h_source, t->local_mac, 6);
	oe->h_proto = bpf_htons(ETH_P_IP);
	*(__u16 *)oi = bpf_htons(0x4500);
	oi->tot_len = bpf_htons(iplen);
	/* Not atomic: CPUs sending on one tunnel at once may repeat an
	 * identification (DF is clear but nothing here fragments). */
	__u32 ident = t->ident + 1;

	t->ident = ident;
	oi->id = bpf_htons((__u16)ident);
	oi->frag_off = 0;
	oi->ttl = TUN_OUTER_TTL;
	oi->protocol = ipip ? 4 : 17;
	oi->saddr = t->local;
	oi->daddr = t->remote;
	tun_fill_checksum(oi);
	if (ipip)
		return;
	ou[0] = bpf_htons(sport);
	ou[1] = bpf_htons(t->udp_port);
	ou[2] = bpf_htons(iplen - 20);
	ou[3] = 0;
	if (over == VXLAN_OVERHEAD) {
		__be32 *vx = (void *)(ou + 4);

		vx[0] = bpf_htonl((__u32)VXLAN_FLAG_I << 24);
		vx[1] = bpf_htonl((t->vni & 0xffffff) << 8);
	}
}

/* The slow path for a frame that tun_decap stripped `undo` bytes from (0:
 * none): its outer headers back first, so the slow path gets the frame as
 * it came. */
static __always_inline int slow(struct xdp_md *ctx, int undo)
{
	if (undo > 0) {
		__u32 zero = 0;
		struct tun_saved *sv = bpf_map_lookup_elem(&tun_saved, &zero);
		struct tun_counters *tc = tun_count(sv ? sv->tid : TUN_MAX);

		if (tc)
			tc->to_slow_restored += 1;
		if (bpf_xdp_adjust_head(ctx, -undo))
			return XDP_DROP;
	}
	if (undo == IPIP_UNDO) {
		/* The outer IPv4 header's bytes the made-up Ethernet header
		 * took. */
		__u32 zero = 0;
		struct tun_saved *sv = bpf_map_lookup_elem(&tun_saved, &zero);
		void *data = (void *)(long)ctx->data;
		void *end = (void *)(long)ctx->data_end;
		__u8 *at = data + IPIP_UNDO;

		if (!sv || !sv->valid || (void *)(at + 14) > end)
			return XDP_DROP;
		__builtin_memcpy(at, sv->bytes, 14);
		sv->valid = 0;
	}
	return to_slow(ctx);
}

/* Forward the routed frame (checked by the caller: untagged IPv4, IHL 5,
 * TTL > 1) out of the tunnel vNIC of neighbour `n`: the router's rewrite,
 * then the outer headers. `undo` as for slow(). */
static __always_inline int tun_encap(struct xdp_md *ctx, const struct fast_switch *sw,
				     struct fast_counters *c,
				     struct neigh_val *n, int undo)
{
	__u32 tid = n->ifindex & ~TUN_IFINDEX;
	struct tunnel *t = bpf_map_lookup_elem(&tunnels, &tid);
	struct tun_counters *tc = tun_count(tid);

	if (!tc || !t || t->kind == 0 || t->kind > TUN_KIND_IPIP ||
	    !(t->flags & TUN_PEER_KNOWN)) {
		if (tc)
			tc->to_slow_no_mac += 1;
		c->to_slow_no_neighbour += 1;
		return slow(ctx, undo);
	}
	if (bpf_redirect_map(&out_ports, t->ifindex, 0) != XDP_REDIRECT) {
		c->to_slow_no_port += 1;
		return slow(ctx, undo);
	}
	/* Bytes of outer headers, and of the frame's own they replace (an
	 * IP-in-IP packet leaves without its Ethernet header). */
	int over = t->kind == TUN_KIND_VXLAN ? VXLAN_OVERHEAD :
		   t->kind == TUN_KIND_UDP ? UDP_OVERHEAD : IPIP_HEADERS;
	int strip = t->kind == TUN_KIND_IPIP ? ETH_HLEN : 0;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);

	if ((void *)(ip + 1) > end)
		return XDP_DROP;
	decrement_ttl(ip);
	__builtin_memcpy(eth->h_dest, n->dst_mac, 6);
	__builtin_memcpy(eth->h_source, n->src_mac, 6);
	__u16 sport = tun_src_port(ip, end);
	__u16 inner = (__u16)(end - data) - strip;

	if (bpf_xdp_adjust_head(ctx, -(over - strip))) {
		tc->drop_headroom += 1;
		return XDP_DROP;
	}
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + VXLAN_OVERHEAD > end)
		return XDP_DROP;
	tun_write_outer(data, t, over, inner, sport);
	c->fwd += 1;
	tc->encap += 1;
	__u32 h = t->local ^ t->remote ^ sport;
	int s = spread(ctx, sw, t->ifindex, h ^ (h >> 16));

	if (s >= 0)
		return s;
	return (int)bpf_redirect_map(&out_ports, t->ifindex, 0);
}
