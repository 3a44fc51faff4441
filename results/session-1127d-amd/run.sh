#!/bin/sh
# The quiet runs of 2026-11-27 ~12:00 UTC. B: main before r-fastcost3
# (the watchdog and quantile commits, no fast_switch); A: main after it,
# with the minimal forwarder. Env: B_BINARY, A_BINARY; output here.
set -u
out=$(dirname "$0")
for r in 1 2 3; do
  for v in B A; do
    eval bin=\$${v}_BINARY
    $bin bench fastpath --experiments cost --table 2 --json > "$out/cost2-$v$r.json" 2> "$out/cost2-$v$r.log"
  done
done
for v in B A; do
  eval bin=\$${v}_BINARY
  $bin bench fastpath --experiments cost --json > "$out/costfull-$v.json" 2> "$out/costfull-$v.log"
done
for r in 1 2; do
  for v in B A; do
    eval bin=\$${v}_BINARY
    $bin bench fastpath --experiments forward --generators live --forwarders kernel,kernel_norps,fast --table 2 > "$out/fwd-$v$r.txt" 2>&1
  done
done
$A_BINARY bench fastpath --experiments forward,tcp,ping --generators live --forwarders kernel,kernel_norps,fast,minimal --table 2 > "$out/minimal.txt" 2>&1
