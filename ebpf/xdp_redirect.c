// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * xdp_redirect.c: the XDP program of vrhost's AF_XDP port
 * (crates/io/src/af_xdp.rs).
 *
 * Every frame that arrives on the interface is redirected to the AF_XDP
 * socket bound to its rx queue, looked up in the XSKMAP `xsks` by
 * ctx->rx_queue_index. A queue without a socket (the map entry is empty:
 * not bound yet, or already closed) falls back to XDP_PASS, so the kernel
 * stack keeps the frame instead of losing it.
 *
 * A frame with XDP metadata is no received frame but one of the port's
 * own transmit batches (`tx = "xdp"`, xdp_txlive.h): it is sent, never
 * redirected to a socket.
 *
 * `redirected` is a one-slot per-CPU array counting the frames handed to a
 * socket; user space sums the CPUs' slots when it reads it (no atomic
 * shared across cores on this path).
 *
 * Licence: vrhost is MIT OR Apache-2.0. This file is "Dual MIT/GPL" (the
 * string below) because the kernel refuses GPL-only helpers to programs
 * that do not declare a GPL-compatible licence; MIT keeps it usable under
 * the project's own terms.
 *
 * Built by crates/io/build.rs with
 *   clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -c
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "xdp_txlive.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	/* Resized by the loader to the interface's rx queue count. */
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} redirected SEC(".maps");

SEC("xdp")
int xdp_redirect_xsk(struct xdp_md *ctx)
{
	__u32 zero = 0;
	void *meta = (void *)(long)ctx->data_meta;
	void *data = (void *)(long)ctx->data;

	/* Only the port's own test run brings metadata. */
	if (meta < data)
		return xdp_txlive(ctx);
	long action = bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);

	if (action == XDP_REDIRECT) {
		__u64 *n = bpf_map_lookup_elem(&redirected, &zero);

		/* Per-CPU slot: only this CPU writes it, no atomic needed. */
		if (n)
			*n += 1;
	}
	return (int)action;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
