#!/bin/sh
cd "$(dirname "$0")/../.."
B=vrhost
O=results/fastbench-busy
for i in 1 2; do
  for t in napi plain; do
    f=""; [ $t = napi ] && f="--threaded-napi"
    echo "== run $i tcp ends $t $(date -u +%H:%M:%S)"
    $B bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast $f --tcp-seconds 4 --out $O/tcp-ends-$t-r$i.json > $O/tcp-ends-$t-r$i.txt 2>$O/tcp-ends-$t-r$i.err
    echo rc=$?; uptime
  done
done
for c in 0 1; do
  echo "== ping cpu $c $(date -u +%H:%M:%S)"
  $B bench fastpath --experiments ping --forwarders kernel,kernel_norps,fast --table 2 --ping-rounds 2 --ping-count 150 --ping-cpu $c --out $O/ping-cpu$c.json > $O/ping-cpu$c.txt 2>$O/ping-cpu$c.err
  echo rc=$?
done
