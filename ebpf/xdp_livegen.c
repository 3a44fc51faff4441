// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xdp_livegen.c: the benchmarks' live-frames generator (crates/fast,
 * `livegen`, which loads it and runs it).
 *
 * It is not attached to any interface: user space runs it with
 * BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES, with the generator's veth
 * as ingress_ifindex. The kernel builds each frame from the template given
 * as data_in (a 64-byte UDP/IPv4 frame to the discard port), runs this
 * program on it, and sends what it returns XDP_TX for out of that veth:
 * the frame enters the peer as an xdp_frame, with no skb and no copy.
 *
 * Per run:
 *  0. The headers (Ethernet, IPv4, UDP: 42 bytes) written again from
 *     conf.hdr: the kernel builds a page from data_in only once and then
 *     recycles it with what the last receiver left in it, and a forwarder
 *     in XDP rewrites the frame in place (TTL, MACs), so without this the
 *     TTL would run down over the recycles.
 *  1. Pacing (conf.rate_pps > 0): a token bucket refilled from
 *     bpf_ktime_get_ns(), at most conf.burst frames deep; without a token
 *     the frame is dropped here (XDP_DROP, counted paced_out) and costs
 *     the wire nothing.
 *  2. The frame's sequence number: seq = state.seq++, flow = seq % flows,
 *     the flow's own sequence number seq / flows (so each flow counts
 *     0, 1, 2, ... and a sink can count gaps and reorderings per flow).
 *     Written into the UDP payload as {magic "VRLG", flow (u32), flow
 *     sequence (u64)}, host order, at offset 42; the UDP source port is
 *     4000 + flow.
 *  3. conf.random_dst: a random destination address whose first octet is
 *     1..223 but not 10 or 127 (as the forward bench's trafgen config for
 *     a full table), and the IPv4 header checksum computed again.
 *  4. conf.mix > 1: frames whose seq % mix is not 0 get conf.alt_dst as
 *     their destination MAC (one frame to the template's MAC, mix - 1 to
 *     the other, in turn: two tenants on one port for the fairness run).
 *     With conf.first_pps, the template's MAC gets its frames from a
 *     token bucket of its own at that rate instead, and alt_dst the rest:
 *     the first tenant is offered its rate whatever the other's, as long
 *     as the generator makes that many frames at all (counted
 *     first_sent).
 *  5. sent++ and XDP_TX; or, with conf.via_cpu (CPU c + 1), XDP_REDIRECT
 *     into livegen_cpus[c] (below).
 *
 * Through another CPU (conf.via_cpu): XDP_TX makes the kernel hand the
 * frame to the veth at once (ndo_xdp_xmit), and a veth schedules its
 * peer's NAPI on the CPU that sent: the receiver's XDP program, and the
 * whole forward behind it, would run on the generator's core and slow it.
 * Instead the frame is redirected into the CPUMAP livegen_cpus, whose
 * entry for CPU c runs xdp_livegen_out in that CPU's cpumap kthread: it
 * redirects the frame into the DEVMAP livegen_out (the generator's veth),
 * so ndo_xdp_xmit, the peer's NAPI and everything behind it run on CPU c
 * and the generator keeps its core. A frame the cpumap's queue cannot
 * take is dropped by the kernel there (tracepoint
 * xdp:xdp_cpumap_enqueue): it was counted sent, as a frame the veth
 * refuses is.
 *
 * State is a plain array, not per CPU and not atomic: one thread runs the
 * generator (one BPF_PROG_RUN at a time, on its pinned core).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define LIVEGEN_MAGIC 0x474c5256 /* "VRLG" read as a little-endian u32 */
#define PAYLOAD_OFF 42
#define NS 1000000000ULL

#define HDR_LEN 42

struct livegen_conf {
	__u32 flows;
	__u32 random_dst;
	__u64 rate_pps;
	__u64 burst;
	/* the template's first HDR_LEN bytes; the rest is padding */
	__u8 hdr[48];
	/* frames not 0 mod mix go to alt_dst (mix <= 1: none) */
	__u32 mix;
	/* 0: XDP_TX; c + 1: through CPU c's entry of livegen_cpus */
	__u32 via_cpu;
	/* 6 bytes used */
	__u8 alt_dst[8];
	/* with mix > 1: frames/s to the template's MAC (0: one in mix) */
	__u64 first_pps;
};

_Static_assert(sizeof(struct livegen_conf) == 96, "livegen_conf: abi.rs");

struct livegen_state {
	__u64 seq;
	__u64 sent;
	__u64 paced_out;
	/* tokens in frame-nanoseconds: one frame is NS */
	__u64 tokens;
	__u64 last_ns;
	/* frames sent to the template's MAC */
	__u64 first_sent;
	/* conf.first_pps's bucket, as tokens and last_ns */
	__u64 first_tokens;
	__u64 first_last_ns;
};

struct livegen_mark {
	__u32 magic;
	__u32 flow;
	__u64 seq;
} __attribute__((packed));

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct livegen_conf);
} livegen_conf SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct livegen_state);
} livegen_state SEC(".maps");

/* CPU -> queue running xdp_livegen_out (set by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} livegen_cpus SEC(".maps");

/* 0 -> the generator's veth (set from inside its namespace). */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_devmap_val);
} livegen_out SEC(".maps");

/* Whether a token bucket of `rate` frames/s, `burst` frames deep, admits
 * one more frame now. */
static __always_inline int bucket(__u64 rate, __u64 burst, __u64 *tokens, __u64 *last_ns)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 elapsed = now - *last_ns;
	__u64 cap = (burst ? burst : 1) * NS;

	*last_ns = now;
	/* bounded so that elapsed * rate cannot overflow */
	if (elapsed > NS)
		elapsed = NS;
	*tokens += elapsed * rate;
	if (*tokens > cap)
		*tokens = cap;
	if (*tokens < NS)
		return 0;
	*tokens -= NS;
	return 1;
}

/* Whether the token bucket admits one more frame now. */
static __always_inline int admit(const struct livegen_conf *c, struct livegen_state *s)
{
	return bucket(c->rate_pps, c->burst, &s->tokens, &s->last_ns);
}

/* Whether this frame goes to the template's MAC (see 4.). */
static __always_inline int to_first(const struct livegen_conf *c, struct livegen_state *s)
{
	if (c->mix <= 1)
		return 1;
	if (c->first_pps)
		/* 4 ms of its rate deep, as the total's (livegen.rs) */
		return bucket(c->first_pps, c->first_pps / 250 + 1, &s->first_tokens,
			      &s->first_last_ns);
	return s->seq % c->mix == 0;
}

static __always_inline void random_dst(struct iphdr *ip)
{
	__u32 r = bpf_get_prandom_u32();
	__u32 o = 1 + (r >> 24) % 221;
	__u16 *w = (__u16 *)ip;
	__u32 sum = 0;

	if (o >= 10)
		o++;
	if (o >= 127)
		o++;
	ip->daddr = bpf_htonl((o << 24) | (bpf_get_prandom_u32() & 0xffffff));
	ip->check = 0;
#pragma unroll
	for (int i = 0; i < 10; i++)
		sum += w[i];
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->check = ~sum & 0xffff;
}

SEC("xdp")
int xdp_livegen(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	struct udphdr *udp = (void *)(ip + 1);
	struct livegen_mark *m = data + PAYLOAD_OFF;
	struct livegen_conf *c;
	struct livegen_state *s;
	__u32 zero = 0, flows, flow;
	int first;

	if ((void *)(m + 1) > end)
		return XDP_ABORTED;
	c = bpf_map_lookup_elem(&livegen_conf, &zero);
	s = bpf_map_lookup_elem(&livegen_state, &zero);
	if (!c || !s)
		return XDP_ABORTED;
	if (c->rate_pps && !admit(c, s)) {
		s->paced_out++;
		return XDP_DROP;
	}
	__builtin_memcpy(data, c->hdr, HDR_LEN);
	flows = c->flows ? c->flows : 1;
	flow = s->seq % flows;
	first = to_first(c, s);
	if (!first)
		__builtin_memcpy(data, c->alt_dst, ETH_ALEN);
	m->magic = LIVEGEN_MAGIC;
	m->flow = flow;
	m->seq = s->seq / flows;
	s->seq++;
	udp->source = bpf_htons(4000 + flow);
	if (c->random_dst)
		random_dst(ip);
	if (c->via_cpu) {
		/* A CPU without an entry: not sent, and visible as such. */
		if (bpf_redirect_map(&livegen_cpus, c->via_cpu - 1, XDP_ABORTED) != XDP_REDIRECT)
			return XDP_ABORTED;
		s->sent++;
		s->first_sent += first;
		return XDP_REDIRECT;
	}
	s->sent++;
	s->first_sent += first;
	return XDP_TX;
}

/* In the cpumap kthread of conf.via_cpu's CPU: into the generator's veth. */
SEC("xdp/cpumap")
int xdp_livegen_out(struct xdp_md *ctx)
{
	return (int)bpf_redirect_map(&livegen_out, 0, XDP_DROP);
}

char _license[] SEC("license") = "Dual MIT/GPL";
