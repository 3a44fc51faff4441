#!/bin/bash
# Quiet-machine benchmark runs of the session of 2026-11-26 20:47-23:47 UTC (AMD EPYC 2 vCPU).
cd "$(git rev-parse --show-toplevel)"
R=results/session-0731-amd; mkdir -p $R
B=$PREVIOUS_BINARY   # the previous session's binary
A=$THIS_BINARY   # this session's merges
t() { echo "== $(date -u +%H:%M:%S) $*"; }
MEM="bench memory --modes shm --vrs 1,10,100 --repeat 2 --seconds 2 --no-pool-sweep --no-idle --no-idle-beside"
t memory before/after/huge
for i in 1 2; do
  $B $MEM > $R/memory-before-$i.txt 2>&1
  $A $MEM --json > $R/memory-after-$i.json 2> $R/memory-after-$i.err
  $A $MEM --hugepages auto --json > $R/memory-huge-$i.json 2> $R/memory-huge-$i.err
done
t memory idle
$A bench memory --modes shm --vrs 1 --repeat 1 --seconds 2 --no-pool-sweep --no-idle-beside --idle-vrs 10,100 > $R/memory-idle.txt 2>&1
t ping defaults before/after
for i in 1 2; do
  $B bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 50 --idle-pings 10 --tcp-seconds 0 --out $R/ping-before-$i.json > $R/ping-before-$i.txt 2>&1
  $A bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 50 --idle-pings 10 --tcp-seconds 0 --out $R/ping-after-$i.json > $R/ping-after-$i.txt 2>&1
done
t tcp tx_batch 0 / 256
for b in 0 256; do
  $A bench forward --forwarders kernel,af_xdp_txlive --generator live --loads 0.25 --pings 0 --tx-batch $b --tx-wait-us 100 --out $R/tcp-batch$b.json > $R/tcp-batch$b.txt 2>&1
done
t forward live after
$A bench forward --forwarders kernel,kernel_norps,af_xdp,af_xdp_txlive,socket --generator live --frame-bytes 64,1500 --loads 0.25,1 --out $R/forward-live.json > $R/forward-live.txt 2>&1
t fastpath
$A bench fastpath --out $R/fastpath.json > $R/fastpath.txt 2>&1
t cluster
$A bench cluster --out $R/cluster.json --plot $R/cluster.png > $R/cluster.txt 2>&1
t cluster rtt variants
$A bench cluster --experiments rtt --busy-engines true --out $R/rtt-engines.json > $R/rtt-engines.txt 2>&1
$A bench cluster --experiments rtt --busy-engines true --busy-cpus 0,1 --out $R/rtt-pinned.json > $R/rtt-pinned.txt 2>&1
$A bench cluster --experiments rtt --out $R/rtt-default.json > $R/rtt-default.txt 2>&1
t isolation
$A bench isolation --experiments hostile,kill,overload --out $R/isolation.json > $R/isolation.txt 2>&1
t overload again
for i in 1 2; do $A bench isolation --experiments overload --out $R/overload-$i.json > $R/overload-$i.txt 2>&1; done
t done
