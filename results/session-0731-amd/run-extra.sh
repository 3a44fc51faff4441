#!/bin/bash
cd "$(git rev-parse --show-toplevel)"
R=results/session-0731-amd
B=$PREVIOUS_BINARY; A=$THIS_BINARY
t() { echo "== $(date -u +%H:%M:%S) $*"; }
t ping pinned before/after
for i in 1 2; do
  $B bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 50 --idle-pings 10 --tcp-seconds 0 --ping-cpu 0 --out $R/ping0-before-$i.json > $R/ping0-before-$i.txt 2>&1
  $A bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 50 --idle-pings 10 --tcp-seconds 0 --ping-cpu 0 --out $R/ping0-after-$i.json > $R/ping0-after-$i.txt 2>&1
done
MEM="bench memory --modes shm --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside"
t memory again
$B $MEM > $R/memory-before-3.txt 2>&1
$A $MEM > $R/memory-after-3.txt 2>&1
$A $MEM --hugepages auto > $R/memory-huge-3.txt 2>&1
t tcp batch again
for b in 0 256; do
  $A bench forward --forwarders kernel,af_xdp_txlive --generator live --loads 0.25 --pings 0 --tx-batch $b --tx-wait-us 100 --out $R/tcp-batch$b-2.json > $R/tcp-batch$b-2.txt 2>&1
done
t rtt busy engines again
for i in 2 3; do
  $A bench cluster --experiments rtt --busy-engines true --out $R/rtt-engines-$i.json > $R/rtt-engines-$i.txt 2>&1
  $A bench cluster --experiments rtt --busy-engines false --out $R/rtt-dispatcher-$i.json > $R/rtt-dispatcher-$i.txt 2>&1
done
t done
