#!/bin/sh
# LOCK: the bench lock file (flock), taken by the caller
# usage: prof.sh FWD OUT  (run under the bench lock)
BIN=target/release/vrhost
FWD=$1; OUT=$2
$BIN bench forward --forwarders $FWD --tcp-placements pinned --loads 1 --seconds 0.3 --warmup 0.1 --pings 0 --idle-pings 0 --tcp-seconds 10 > $OUT.txt 2>&1 &
B=$!
i=0
while ! pgrep -x iperf3 >/dev/null; do i=$((i+1)); [ $i -gt 900 ] && break; sleep 0.1; done
sleep 2
D=$(pgrep -f "vrhost-$FWD.toml" | head -1)
P=$D
if [ -n "$D" ]; then for v in $(pgrep -P $D); do P="$P,$v"; done; fi
if [ -n "$P" ]; then
  perf stat -e raw_syscalls:sys_enter,context-switches -p $P -o $OUT.stat -- sleep 4 &
fi
ip netns exec vrhb-sink cat /sys/class/net/eth0/statistics/rx_packets > $OUT.seg
ip netns exec vrhb-gen cat /sys/class/net/eth0/statistics/rx_packets >> $OUT.seg
perf stat -e raw_syscalls:sys_enter,context-switches -C 1 -o $OUT.cpu1.stat -- sleep 4 &
perf record -q -e cpu-clock -C 1 -g -o $OUT.data -- sleep 4 2>/dev/null
ip netns exec vrhb-sink cat /sys/class/net/eth0/statistics/rx_packets >> $OUT.seg
ip netns exec vrhb-gen cat /sys/class/net/eth0/statistics/rx_packets >> $OUT.seg
wait
