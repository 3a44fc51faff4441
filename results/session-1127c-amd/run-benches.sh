#!/bin/bash
# Quiet-machine benchmark runs of the session of 2026-11-27 06:39 - 09:39 UTC
# (AMD EPYC 2 vCPU, the ninth session's VM).
# B = the previous session's binary (b3432da), A = this session's merges,
# H = B with results/vrping-busy/hand-over-at-once.diff.txt applied.
cd "$(git rev-parse --show-toplevel)"
R=results/session-1127c-amd; mkdir -p $R
B=$PREVIOUS_BINARY
A=$THIS_BINARY
H=$HANDOVER_BINARY
t() { echo "== $(date -u +%H:%M:%S) $*"; }
t fastpath forward, cost
$A bench fastpath --experiments forward --generators live --forwarders kernel,kernel_norps,fast --out $R/fastfwd.json > $R/fastfwd.txt 2>&1
$A bench fastpath --experiments cost --out $R/cost.json > $R/cost.txt 2>&1
t fastpath tcp: end hosts without a qdisc, and with pfifo_fast, alternated
for i in 1 2; do
  $A bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast --tcp-qdisc none --out $R/fasttcp-none-$i.json > $R/fasttcp-none-$i.txt 2>&1
  $A bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast --tcp-qdisc pfifo-fast --out $R/fasttcp-pfifo-$i.json > $R/fasttcp-pfifo-$i.txt 2>&1
done
t fastpath ping, migrate, idle, fairness
$A bench fastpath --experiments ping,migrate,idle,fairness --forwarders kernel,kernel_norps,fast --fairness-paths slow,fast --fairness-bytes 1500 --out $R/fastpath-rest.json > $R/fastpath-rest.txt 2>&1
t memory B/A, with the line round trip
MEM="bench memory --modes shm --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside"
for i in 1 2; do
  $B $MEM > $R/memory-before-$i.txt 2>&1
  $A $MEM > $R/memory-after-$i.txt 2>&1
done
t memory 100 VRs, huge pages auto/off alternated
for i in 1 2; do
  $A bench memory --modes shm --vrs 100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside --hugepages auto > $R/memory100-huge-$i.txt 2>&1
  $A bench memory --modes shm --vrs 100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside --hugepages off > $R/memory100-off-$i.txt 2>&1
done
t memory idle
$A bench memory --modes shm --vrs 1 --repeat 1 --seconds 2 --no-pool-sweep --no-idle-beside --idle-vrs 10,100 > $R/memory-idle.txt 2>&1
t ping through an idle VR: B and H alternated
PING="bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 50 --idle-pings 10 --tcp-seconds 0"
for i in 1 2 3; do
  $B $PING --out $R/ping-before-$i.json > $R/ping-before-$i.txt 2>&1
  $H $PING --out $R/ping-handover-$i.json > $R/ping-handover-$i.txt 2>&1
done
t txlive short runs through the socket: 0 and 32 alternated, 1500 B and TCP
TX="bench forward --forwarders kernel,af_xdp_txlive --generator live --frame-bytes 1500 --loads 1 --pings 0 --idle-pings 0"
for i in 1 2; do
  $A $TX --tx-socket-below 0 --out $R/tx-below0-$i.json > $R/tx-below0-$i.txt 2>&1
  $A $TX --tx-socket-below 32 --out $R/tx-below32-$i.json > $R/tx-below32-$i.txt 2>&1
done
t forward live: 64 and 1500 B, TCP, ping
$A bench forward --forwarders kernel,kernel_norps,af_xdp,af_xdp_txlive,socket --generator live --frame-bytes 64,1500 --loads 0.25,1 --pings 50 --idle-pings 10 --out $R/forward-live.json > $R/forward-live.txt 2>&1
t isolation
$A bench isolation --experiments hostile,kill,overload --out $R/isolation.json > $R/isolation.txt 2>&1
t done
