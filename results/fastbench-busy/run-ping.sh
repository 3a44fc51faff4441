#!/bin/sh
cd "$(dirname "$0")/../.."
B=vrhost
O=results/fastbench-busy
echo "== ping $(date -u +%H:%M:%S)"
$B bench fastpath --experiments ping --forwarders kernel,kernel_norps,fast --ping-rounds 3 --ping-count 200 --out $O/ping.json > $O/ping.txt 2>$O/ping.err
echo rc=$?; uptime
