#!/bin/sh
# Second pass, 12:06 UTC (the first pass's first cost runs had other load):
# cost A/B alternated 3x (table 2) and 2x (full), then TCP with the
# minimal router twice.
set -u
out=$(dirname "$0")
for r in 4 5 6; do
  for v in B A; do
    eval bin=\$${v}_BINARY
    $bin bench fastpath --experiments cost --table 2 --json > "$out/cost2-$v$r.json" 2> "$out/cost2-$v$r.log"
  done
done
# The full table path is relative to the repository.
cd "$out/../.." || exit 1
for r in 2 3; do
  for v in B A; do
    eval bin=\$${v}_BINARY
    $bin bench fastpath --experiments cost --json > "results/session-1127d-amd/costfull-$v$r.json" 2> "results/session-1127d-amd/costfull-$v$r.log"
  done
done
for r in 1 2; do
  $A_BINARY bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast,minimal > "results/session-1127d-amd/tcp-minimal-$r.txt" 2>&1
done
