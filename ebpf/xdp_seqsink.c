// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * xdp_seqsink.c: the benchmarks' counting sink (crates/fast, `livegen`).
 *
 * Like xdp_sink.c it drops IPv4 UDP frames to the discard port (9) at the
 * earliest point and passes everything else (ARP, ICMP, TCP for iperf3).
 * Frames that carry the live generator's mark (xdp_livegen.c: magic
 * "VRLG", flow, the flow's sequence number) are counted per flow:
 *  received   frames of the flow;
 *  next       the sequence number expected next (highest seen + 1);
 *  lost       sequence numbers skipped: seq > next adds seq - next; a late
 *             frame (seq < next) takes one back, as it was counted lost;
 *  reordered  frames that arrived after a later one of their flow.
 * Other discard-port frames (trafgen's) are counted in `other`. Every
 * discard-port frame is also counted in `seqsink_cpus`, per CPU: on which
 * core the receive side ran (the generator's, or the one it hands its
 * frames to).
 *
 * The flow state is a plain array, updated without atomics: XDP runs one
 * NAPI poll of a receive queue at a time, and the sink's veth has one
 * receive queue (whatever CPU the frames were sent from).
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define LIVEGEN_MAGIC 0x474c5256
#define MAX_FLOWS 256

struct livegen_mark {
	__u32 magic;
	__u32 flow;
	__u64 seq;
} __attribute__((packed));

struct flow_state {
	__u64 received;
	__u64 next;
	__u64 lost;
	__u64 reordered;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FLOWS);
	__type(key, __u32);
	__type(value, struct flow_state);
} seqsink_flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seqsink_other SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} seqsink_cpus SEC(".maps");

static __always_inline void count(struct flow_state *f, __u64 seq)
{
	f->received++;
	if (seq >= f->next) {
		f->lost += seq - f->next;
		f->next = seq + 1;
	} else {
		f->reordered++;
		if (f->lost)
			f->lost--;
	}
}

SEC("xdp")
int xdp_seqsink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct udphdr *udp;
	struct livegen_mark *m;
	struct flow_state *f;
	__u32 zero = 0, flow;
	__u64 *other, *here;

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return XDP_PASS;
	udp = (void *)(ip + 1);
	if ((void *)(udp + 1) > end || udp->dest != bpf_htons(9))
		return XDP_PASS;
	here = bpf_map_lookup_elem(&seqsink_cpus, &zero);
	/* Per-CPU slot: only this CPU writes it. */
	if (here)
		*here += 1;
	m = (void *)(udp + 1);
	if ((void *)(m + 1) <= end && m->magic == LIVEGEN_MAGIC) {
		flow = m->flow;
		f = bpf_map_lookup_elem(&seqsink_flows, &flow);
		if (f) {
			count(f, m->seq);
			return XDP_DROP;
		}
	}
	other = bpf_map_lookup_elem(&seqsink_other, &zero);
	if (other)
		*other += 1;
	return XDP_DROP;
}

char _license[] SEC("license") = "Dual MIT/GPL";
