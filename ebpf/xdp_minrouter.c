// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * xdp_minrouter.c: a minimal XDP router, the reference the fast path's
 * own cost is measured against (crates/fast/src/cost.rs, `vrhost bench
 * fastpath --experiments cost`). Not a router of vrhost's: one next hop
 * for every frame, no select table, no route lookup, no counters.
 *
 * Per frame, what BENCHMARKING.md's "minimal XDP router" does: an
 * untagged, option-less IPv4 frame with TTL > 1 has its TTL decremented
 * (the checksum updated as RFC 1624), its MACs rewritten from `minr_hop`
 * [0], and is redirected through the devmap `minr_out` [0]. Anything else
 * passes (XDP_PASS).
 *
 * Licence: "Dual MIT/GPL", as xdp_router.c.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#include "xdp_ttl.h"

struct minr_hop {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 ifindex;
};

_Static_assert(sizeof(struct minr_hop) == 16, "minr_hop: cost.rs");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct minr_hop);
} minr_hop SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} minr_out SEC(".maps");

SEC("xdp")
int xdp_minrouter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	__u32 zero = 0;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->ihl != 5 || ip->ttl <= 1)
		return XDP_PASS;
	struct minr_hop *h = bpf_map_lookup_elem(&minr_hop, &zero);

	if (!h)
		return XDP_PASS;
	decrement_ttl(ip);
	__builtin_memcpy(eth->h_dest, h->dst_mac, 6);
	__builtin_memcpy(eth->h_source, h->src_mac, 6);
	return (int)bpf_redirect_map(&minr_out, 0, 0);
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
