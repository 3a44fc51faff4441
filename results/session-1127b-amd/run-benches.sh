#!/bin/bash
# Quiet-machine benchmark runs of the session of 2026-11-27 03:19 - 06:19 UTC (AMD EPYC 2 vCPU, the ninth session's VM).
# B = the previous session's binary (c16a55c), A = this session's merges.
cd "$(git rev-parse --show-toplevel)"
R=results/session-1127b-amd; mkdir -p $R
B=$PREVIOUS_BINARY
A=$THIS_BINARY
t() { echo "== $(date -u +%H:%M:%S) $*"; }
FWD="bench fastpath --experiments forward --generators live --forwarders kernel,kernel_norps,fast"
t fastpath forward B/A
for i in 1 2; do
  $B $FWD --out $R/fastfwd-before-$i.json > $R/fastfwd-before-$i.txt 2>&1
  $A $FWD --out $R/fastfwd-after-$i.json > $R/fastfwd-after-$i.txt 2>&1
done
t fastpath cost
$A bench fastpath --experiments cost --out $R/cost.json > $R/cost.txt 2>&1
MEM="bench memory --modes shm,inproc --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside"
t memory B/A/A-rx-group-0
for i in 1 2; do
  $B $MEM > $R/memory-before-$i.txt 2>&1
  $A $MEM > $R/memory-after-$i.txt 2>&1
  $A $MEM --rx-group 0 > $R/memory-group0-$i.txt 2>&1
done
t memory idle
$A bench memory --modes shm --vrs 1 --repeat 1 --seconds 2 --no-pool-sweep --no-idle-beside --idle-vrs 10,100 > $R/memory-idle.txt 2>&1
t forward live: 64 and 1500 B, TCP with the new reference, ping
$A bench forward --forwarders kernel,kernel_norps,af_xdp,af_xdp_txlive,socket --generator live --frame-bytes 64,1500 --loads 0.25,1 --pings 50 --idle-pings 10 --out $R/forward-live.json > $R/forward-live.txt 2>&1
t fastpath tcp, migrate, idle
$A bench fastpath --experiments tcp,migrate,idle --out $R/fastpath-rest.json > $R/fastpath-rest.txt 2>&1
t isolation
$A bench isolation --experiments hostile,kill,overload --out $R/isolation.json > $R/isolation.txt 2>&1
t done
