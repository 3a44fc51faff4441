/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * A VR written in C: a two-port bridge with a UDP port filter, the C twin
 * of crates/sdk/examples/udp_filter_bridge.rs.
 *
 * Frames entering vNIC 0 leave on vNIC 1 and back; UDP datagrams (over
 * IPv4, with or without one VLAN tag) to the blocked destination port are
 * dropped as `filtered`; frames too short for their headers as
 * `bad_header`. It counts what it forwarded and filtered, and answers the
 * control message {"op":"counters"} with them.
 *
 * Config (the VR's `config` in the host): {"block_udp_port": 53}.
 *
 * Build: cc -O2 -I crates/sdk-c/include udp_filter_bridge.c \
 *            target/release/libvrhost_sdk_c.a -lpthread -ldl -lm
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrhost_sdk.h"

struct bridge {
    long blocked_port; /* -1: none */
    unsigned long long forwarded;
    unsigned long long filtered;
};

/* The value of "block_udp_port" in the config, or -1 without one; -2 if
 * it is there but not a port number. */
static long port_of(const char *json)
{
    const char *key = strstr(json, "\"block_udp_port\"");
    if (key == NULL)
        return -1;
    const char *colon = strchr(key, ':');
    if (colon == NULL)
        return -2;
    char *end;
    long v = strtol(colon + 1, &end, 10);
    if (end == colon + 1 || v < 0 || v > 65535)
        return -2;
    return v;
}

static void *init(const char *config_json, char *err, size_t err_len)
{
    long port = port_of(config_json);
    if (port == -2) {
        snprintf(err, err_len, "config: block_udp_port must be a port number (0..65535)");
        return NULL;
    }
    struct bridge *b = calloc(1, sizeof *b);
    if (b == NULL) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    b->blocked_port = port;
    return b;
}

static int32_t process(void *state, VrhostPacket *pkt)
{
    struct bridge *b = state;
    size_t len;
    const uint8_t *f = vrhost_packet_data(pkt, &len);
    if (len < 14)
        return VRHOST_DROP_BAD_HEADER;
    size_t l3 = 14;
    uint16_t type = (uint16_t)(f[12] << 8 | f[13]);
    if (type == 0x8100) {
        if (len < 18)
            return VRHOST_DROP_BAD_HEADER;
        type = (uint16_t)(f[16] << 8 | f[17]);
        l3 = 18;
    }
    if (type == 0x0800) {
        if (len < l3 + 20)
            return VRHOST_DROP_BAD_HEADER;
        size_t ihl = (size_t)(f[l3] & 0x0f) * 4;
        if (ihl < 20 || len < l3 + ihl + 4)
            return VRHOST_DROP_BAD_HEADER;
        uint16_t dport = (uint16_t)(f[l3 + ihl + 2] << 8 | f[l3 + ihl + 3]);
        if (f[l3 + 9] == 17 && (long)dport == b->blocked_port) {
            b->filtered++;
            return VRHOST_DROP_FILTERED;
        }
    }
    b->forwarded++;
    return vrhost_packet_rx_vnic(pkt) ^ 1;
}

static int32_t control(void *state, const char *body_json, char *reply, size_t reply_len)
{
    struct bridge *b = state;
    if (strstr(body_json, "\"counters\"") == NULL) {
        snprintf(reply, reply_len, "unknown control message (try {\"op\":\"counters\"})");
        return 1;
    }
    snprintf(reply, reply_len, "{\"forwarded\":%llu,\"filtered\":%llu}", b->forwarded, b->filtered);
    return 0;
}

int main(void)
{
    const VrhostVr vr = {
        .init = init,
        .process = process,
        .process_burst = NULL,
        .control = control,
    };
    return vrhost_main(&vr);
}
