#!/bin/sh
# usage: prof.sh OUT [bench options]  (run under the bench lock)
# 10 s of iperf3 pinned through af_xdp_txlive; perf record and perf stat
# of the forwarding core (CPU 1) over 4 s of it.
BIN=${BIN:-target/release/vrhost}
OUT=$1; shift
$BIN bench forward --forwarders af_xdp_txlive --tcp-placements pinned --loads 1 --seconds 0.3 --warmup 0.1 --pings 0 --idle-pings 0 --tcp-seconds 10 "$@" > $OUT.txt 2>&1 &
i=0
while ! pgrep -x iperf3 >/dev/null; do i=$((i+1)); [ $i -gt 900 ] && break; sleep 0.1; done
sleep 2
perf stat -e raw_syscalls:sys_enter,context-switches -C 1 -o $OUT.cpu1.stat -- sleep 4 &
perf record -q -e cpu-clock -C 1 -g -o $OUT.data -- sleep 4 2>/dev/null
wait
