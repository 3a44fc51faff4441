// SPDX-License-Identifier: (MIT OR GPL-2.0)
/* The TTL decrement with its incremental checksum update, shared by the
 * fast path's router (xdp_router.c) and the minimal router it is timed
 * against (xdp_minrouter.c). The includer has linux/ip.h and
 * bpf/bpf_endian.h. */
#ifndef VRHOST_XDP_TTL_H
#define VRHOST_XDP_TTL_H

/* RFC 1624 eq. 3: HC' = ~(~HC + ~m + m'), m the 16-bit word holding TTL
 * and protocol. */
static __always_inline void decrement_ttl(struct iphdr *ip)
{
	__u16 old = bpf_ntohs(*(__be16 *)&ip->ttl);
	__u16 new = old - 0x0100;
	__u32 sum = (__u16)~bpf_ntohs(ip->check);

	sum += (__u16)~old;
	sum += new;
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	ip->ttl -= 1;
	ip->check = bpf_htons((__u16)~sum);
}

#endif
