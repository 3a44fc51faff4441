// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * xdp_txlive.h: the AF_XDP port's transmit through the kernel's XDP test
 * run with live frames (crates/io/src/af_xdp/txlive.rs, port option
 * `tx = "xdp"`), part of the port's own program (xdp_redirect.c).
 *
 * The port writes a batch of frames into the mmap-able array
 * `txlive_frames` (slot i: {len, data}), sets txlive_state.next = 0 and
 * .count = n, and runs the port's program with one BPF_PROG_RUN
 * (BPF_F_TEST_XDP_LIVE_FRAMES, repeat n, the port's interface as
 * ingress_ifindex) on a template that carries 8 bytes of XDP metadata.
 * Frames a driver receives carry none, so the metadata tells the two
 * apart: with it, xdp_redirect_xsk calls xdp_txlive, which sizes the
 * kernel's page of run i to slot next's length, copies the slot's bytes
 * into it and returns XDP_TX; the test run turns that into a redirect out
 * of the ingress interface, so the frame leaves as an xdp_frame through
 * the driver's ndo_xdp_xmit, without an skb (copy-mode AF_XDP transmit
 * builds one skb per frame).
 *
 * Why the port's own program and not one of its own: a test run of an
 * XDP program with repeat > 1 puts it into the kernel's XDP dispatcher
 * and takes it out again afterwards, and each change of the dispatcher
 * rewrites its code and waits for an RCU grace period (a first try with
 * a separate program spent about 120 us of CPU a frame, and most of the
 * worker's time asleep). The attached program is in the dispatcher
 * already, so a run only counts one more user of it.
 *
 * A slot whose length is not 14..=TXLIVE_MAX_FRAME, or a frame the page
 * cannot grow to, is dropped here and counted in `refused`; user space
 * writes only checked lengths, so a count here is a bug, not traffic.
 *
 * State is a plain array, not per CPU and not atomic: the port's one
 * thread runs one BPF_PROG_RUN at a time, and the kernel runs the
 * program's repeats one after another on that CPU. The loader sizes
 * txlive_frames to 1 slot for a port that sends through its socket.
 */
/* Slots of one batch, and the bytes a slot holds (the value is 2 KiB). */
#define TXLIVE_SLOTS 1024
#define TXLIVE_MAX_FRAME 2040
#define MIN_FRAME 14

struct txlive_slot {
	__u32 len;
	__u32 pad;
	__u8 data[TXLIVE_MAX_FRAME];
};

struct txlive_state {
	/* The slot of the next run (user space sets 0 before each call). */
	__u32 next;
	/* Slots written for this call. */
	__u32 count;
	/* Frames handed to XDP_TX, and refused, since the port opened. */
	__u64 sent;
	__u64 refused;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, TXLIVE_SLOTS);
	__type(key, __u32);
	__type(value, struct txlive_slot);
} txlive_frames SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct txlive_state);
} txlive_state SEC(".maps");

static __always_inline int xdp_txlive(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct txlive_state *st = bpf_map_lookup_elem(&txlive_state, &zero);

	if (!st)
		return XDP_ABORTED;
	__u32 i = st->next;

	st->next = i + 1;
	if (i >= st->count) {
		st->refused += 1;
		return XDP_DROP;
	}
	struct txlive_slot *s = bpf_map_lookup_elem(&txlive_frames, &i);

	if (!s) {
		st->refused += 1;
		return XDP_DROP;
	}
	__u32 len = s->len;

	if (len < MIN_FRAME || len > TXLIVE_MAX_FRAME) {
		st->refused += 1;
		return XDP_DROP;
	}
	int have = (int)bpf_xdp_get_buff_len(ctx);

	if (bpf_xdp_adjust_tail(ctx, (int)len - have) ||
	    bpf_xdp_store_bytes(ctx, 0, s->data, len)) {
		st->refused += 1;
		return XDP_DROP;
	}
	st->sent += 1;
	return XDP_TX;
}
