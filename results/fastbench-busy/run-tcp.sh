#!/bin/sh
# TCP A/B: --tcp-gro ends vs gen, alternated, in one script
cd "$(dirname "$0")/../.."
B=vrhost
O=results/fastbench-busy
for i in 1 2; do
  for g in ends gen; do
    echo "== run $i tcp-gro $g $(date -u +%H:%M:%S)"
    $B bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast --tcp-gro $g --tcp-seconds 4 --out $O/tcp-$g-$i.json > $O/tcp-$g-$i.txt 2>$O/tcp-$g-$i.err
    echo rc=$?
    uptime
  done
done
