/* SPDX-License-Identifier: MIT OR Apache-2.0 */

#ifndef VRHOST_SDK_H
#define VRHOST_SDK_H

/* Generated from crates/sdk-c by cbindgen (tests/header.rs); do not edit. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 Drop: a malformed header.
 */
#define VRHOST_DROP_BAD_HEADER -1

/*
 Drop: a bad checksum.
 */
#define VRHOST_DROP_BAD_CHECKSUM -2

/*
 Drop: a protocol the VR does not handle.
 */
#define VRHOST_DROP_UNSUPPORTED -3

/*
 Drop: TTL or hop limit expired.
 */
#define VRHOST_DROP_TTL_EXPIRED -4

/*
 Drop: no route.
 */
#define VRHOST_DROP_NO_ROUTE -5

/*
 Drop: filtered by the VR's policy.
 */
#define VRHOST_DROP_FILTERED -6

/*
 Drop: any other reason (also what an unknown code counts as).
 */
#define VRHOST_DROP_OTHER -7

/*
 Drop: the next hop's address is not resolved yet.
 */
#define VRHOST_DROP_ARP_UNRESOLVED -8

/*
 Drop: the next hop could not be resolved.
 */
#define VRHOST_DROP_HOST_UNREACHABLE -9

/*
 Drop: addressed to the VR itself, and not something it answers.
 */
#define VRHOST_DROP_LOCAL_UNSUPPORTED -10

/*
 Not an error: the VR took what it needed and has nothing to send.
 */
#define VRHOST_DROP_CONSUMED -11

/*
 Drop: multicast a router does not forward.
 */
#define VRHOST_DROP_MULTICAST -12

/*
 Drop: a link-local address that would leave its link.
 */
#define VRHOST_DROP_LINK_LOCAL -13

/*
 Drop: IPv6 extension headers the VR is configured to drop.
 */
#define VRHOST_DROP_EXT_HEADER -14

/*
 A packet in its slot, as a C VR sees it: opaque, read and changed
 through the `vrhost_packet_*` functions, valid only during the
 callback it was given to.
 */
typedef struct VrhostPacket VrhostPacket;

/*
 A VR written in C: its callbacks, given to `vrhost_main`.
 */
typedef struct VrhostVr {
  /*
   Called once, before any packet, with the VR's config (JSON text,
   NUL-terminated; `null` when it has none). Returns the VR's state,
   handed back to every other callback, or NULL on an error, with a
   message written into `err` (`err_len` bytes, NUL included).
   */
  void *(*init)(const char *config_json, char *err, size_t err_len);
  /*
   Called for each packet, to change it in place: returns the vNIC to
   send it out of (`>= 0`) or a `VRHOST_DROP_*` code (`< 0`).
   */
  int32_t (*process)(void *state, struct VrhostPacket *pkt);
  /*
   Optional (NULL: `process` for each packet): called with a whole
   burst of `n` packets (at most 64), to write each one's verdict into
   `verdicts[i]`, as `process` returns it.
   */
  void (*process_burst)(void *state, struct VrhostPacket *const *pkts, int32_t *verdicts, size_t n);
  /*
   Optional (NULL: the VR takes no control messages): a control
   message from the host (JSON text, NUL-terminated). Writes its reply
   (JSON, NUL-terminated; empty: `null`) into `reply` (`reply_len`
   bytes) and returns 0, or writes an error message and returns
   non-zero.
   */
  int32_t (*control)(void *state, const char *body_json, char *reply, size_t reply_len);
} VrhostVr;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/*
 Run a VR written in C: attach to the region the host gave this process,
 call `vr->init` with the VR's config, report ready, and poll until the
 host stops the VR. Returns 0 when the host stopped it, 1 on an error
 (printed on stderr and reported to the host).

 # Safety
 `vr` points to a valid `VrhostVr` whose non-null members are functions
 that keep the header's contract.
 */
int32_t vrhost_main(const struct VrhostVr *vr);

/*
 The packet's bytes (`*len` set to its length). NULL for a NULL packet.

 # Safety
 `pkt` was given to the current callback; `len` is NULL or writable.
 */
uint8_t *vrhost_packet_data(struct VrhostPacket *pkt, size_t *len);

/*
 The packet's length in bytes (0 for a NULL packet).

 # Safety
 `pkt` was given to the current callback.
 */
size_t vrhost_packet_len(struct VrhostPacket *pkt);

/*
 The vNIC the packet arrived on.

 # Safety
 `pkt` was given to the current callback.
 */
uint16_t vrhost_packet_rx_vnic(struct VrhostPacket *pkt);

/*
 Grow the packet by `n` bytes at the front (an encapsulation header):
 returns the new first byte, or NULL if the headroom is too small.

 # Safety
 `pkt` was given to the current callback.
 */
uint8_t *vrhost_packet_push_front(struct VrhostPacket *pkt, size_t n);

/*
 Drop `n` bytes from the front (a decapsulation); false if the packet
 is shorter.

 # Safety
 `pkt` was given to the current callback.
 */
bool vrhost_packet_pull_front(struct VrhostPacket *pkt, size_t n);

/*
 Set the packet's length (within its slot); false if it does not fit.

 # Safety
 `pkt` was given to the current callback.
 */
bool vrhost_packet_set_len(struct VrhostPacket *pkt, size_t len);

/*
 Bytes in the packet's slot: headroom, packet and tailroom.

 # Safety
 `pkt` was given to the current callback.
 */
size_t vrhost_packet_capacity(struct VrhostPacket *pkt);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* VRHOST_SDK_H */
