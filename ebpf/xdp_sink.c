// SPDX-License-Identifier: MIT OR Apache-2.0
// The benchmark sink: drops IPv4 UDP frames, and IPv6 UDP frames without
// extension headers, to the discard port (9) at the
// earliest point, so counting forwarded frames costs the sink no stack
// processing; every other frame (ARP, ICMP, TCP for iperf3) passes.
// Section license "Dual MIT/GPL": the kernel's GPL-only helpers are not
// used, the string only allows the verifier to load it; the project's own
// licence applies to this source.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int xdp_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;

	if ((void *)(eth + 1) <= end && eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = (void *)(eth + 1);

		udp = (void *)(ip6 + 1);
		if ((void *)(udp + 1) > end || ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		return udp->dest == bpf_htons(9) ? XDP_DROP : XDP_PASS;
	}
	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->protocol != IPPROTO_UDP || ip->ihl < 5)
		return XDP_PASS;
	udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > end)
		return XDP_PASS;
	return udp->dest == bpf_htons(9) ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "Dual MIT/GPL";
