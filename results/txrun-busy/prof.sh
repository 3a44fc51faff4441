#!/bin/sh
# prof.sh BELOW: 12 s of TCP (pinned) through af_xdp_txlive with tx_socket_below BELOW; perf on CPU 1 over 4 s of it
B=${B:-vrhost}
BELOW=$1; TAG=below$1
timeout 300 $B bench forward --forwarders af_xdp_txlive --generator live --frame-bytes 64 --loads 0.25 --seconds 0.5 --warmup 0.2 --pings 0 --idle-pings 0 --tcp-seconds 12 --tcp-placements pinned --tx-socket-below $BELOW > out/prof-$TAG.txt 2> out/prof-$TAG.err &
BP=$!
mine() { for p in $(pgrep -x iperf3); do q=$p; while [ "$q" -gt 1 ]; do [ "$q" = "$BP" ] && return 0; q=$(awk '{print $4}' /proc/$q/stat 2>/dev/null || echo 1); done; done; return 1; }
for i in $(seq 1 1500); do mine && break; sleep 0.2; done
sleep 4
a=$(ip netns exec vrhb-sink cat /sys/class/net/eth0/statistics/rx_packets)
perf record -e cpu-clock -C 1 -g -o out/perf-$TAG.data -- sleep 4 2>/dev/null >/dev/null
b=$(ip netns exec vrhb-sink cat /sys/class/net/eth0/statistics/rx_packets)
echo "frames to the sink in the window: $((b-a))" > out/prof-$TAG.frames
wait $BP
cat out/prof-$TAG.frames; grep ^tcp out/prof-$TAG.err | cut -c1-220
