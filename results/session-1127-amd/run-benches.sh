#!/bin/bash
# Quiet-machine benchmark runs of the session of 2026-11-26 23:59 - 2026-11-27 02:59 UTC (AMD EPYC 2 vCPU, a new VM).
cd "$(git rev-parse --show-toplevel)"
R=results/session-1127-amd; mkdir -p $R
B=$PREVIOUS_BINARY   # the previous session's binary (7bc6771)
A=$THIS_BINARY       # this session's merges
t() { echo "== $(date -u +%H:%M:%S) $*"; }
MEM="bench memory --modes shm --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside"
t memory before/after/prefetch
for i in 1 2; do
  $B $MEM > $R/memory-before-$i.txt 2>&1
  $A $MEM > $R/memory-after-$i.txt 2>&1
  $A $MEM --rx-prefetch true > $R/memory-prefetch-$i.txt 2>&1
done
t memory inproc prefetch off/on
$A bench memory --modes inproc --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside --rx-prefetch false > $R/inproc-off.txt 2>&1
$A bench memory --modes inproc --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside --rx-prefetch true > $R/inproc-on.txt 2>&1
t memory idle
$A bench memory --modes shm --vrs 1 --repeat 1 --seconds 2 --no-pool-sweep --no-idle-beside --idle-vrs 10,100 > $R/memory-idle.txt 2>&1
PING="bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 50 --idle-pings 10 --tcp-seconds 0"
t ping before/after/hand-over off
for i in 1 2; do
  $B $PING --out $R/ping-before-$i.json > $R/ping-before-$i.txt 2>&1
  $A $PING --out $R/ping-after-$i.json > $R/ping-after-$i.txt 2>&1
  $A $PING --hand-over false --out $R/ping-noho-$i.json > $R/ping-noho-$i.txt 2>&1
done
t forward live
$A bench forward --forwarders kernel,kernel_norps,af_xdp,af_xdp_txlive,socket --generator live --frame-bytes 64,1500 --loads 0.25,1 --out $R/forward-live.json > $R/forward-live.txt 2>&1
t fastpath
$A bench fastpath --out $R/fastpath.json > $R/fastpath.txt 2>&1
t fastpath migrate before
$B bench fastpath --experiments migrate,idle --out $R/migrate-before.json > $R/migrate-before.txt 2>&1
t fastpath fairness at 1500 B
$A bench fastpath --experiments fairness --fairness-paths slow,fast --fairness-generator live --fairness-bytes 1500 --out $R/fairness-1500.json > $R/fairness-1500.txt 2>&1
t isolation
$A bench isolation --experiments hostile,kill,overload --out $R/isolation.json > $R/isolation.txt 2>&1
t overload 16384
$A bench isolation --experiments overload --slots 16384 --out $R/overload-16k.json > $R/overload-16k.txt 2>&1
t done
