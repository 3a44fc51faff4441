#!/bin/sh
# prof.sh FWD PLACEMENT TAG: 12 s of TCP through FWD; perf -a over 4 s of it, the sink's rx frames over the same window
B=${B:-vrhost}
FWD=$1; PL=$2; TAG=$3; shift 3
timeout 300 $B bench forward --forwarders $FWD --generator live --frame-bytes 64 --loads 0.25 --seconds 0.5 --warmup 0.2 --pings 0 --idle-pings 0 --tcp-seconds 12 --tcp-placements $PL "$@" > out/prof-$TAG.txt 2> out/prof-$TAG.err &
BP=$!
# wait for iperf3 to start
mine() { for p in $(pgrep -x iperf3); do q=$p; while [ "$q" -gt 1 ]; do [ "$q" = "$BP" ] && return 0; q=$(awk '{print $4}' /proc/$q/stat 2>/dev/null || echo 1); done; done; return 1; }
for i in $(seq 1 1500); do mine && break; sleep 0.2; done
sleep 4
a=$(ip netns exec vrhb-sink cat /sys/class/net/eth0/statistics/rx_packets)
perf record -e cpu-clock -a -g -o out/perf-$TAG.data -- sleep 4 2>/dev/null >/dev/null
b=$(ip netns exec vrhb-sink cat /sys/class/net/eth0/statistics/rx_packets)
echo "frames to the sink in the window: $((b-a))" > out/prof-$TAG.frames
wait $BP
cat out/prof-$TAG.frames; grep ^tcp out/prof-$TAG.err | cut -c1-220
