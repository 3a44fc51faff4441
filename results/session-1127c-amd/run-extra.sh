#!/bin/bash
# After run-benches.sh: the fast path's TCP with its forwarding spread to the
# second core through a cpumap (`[host.fast] cpus`, `--fast-cpus 1`), as the
# kernel's reference spreads its forwarding there with RPS; alternated with
# the fast path on the generator's core. A = this session's merges.
cd "$(git rev-parse --show-toplevel)"
R=results/session-1127c-amd
A=$THIS_BINARY
t() { echo "== $(date -u +%H:%M:%S) $*"; }
t "fastpath tcp: fast on the generator's core, and spread to CPU 1, alternated"
for i in 1 2; do
  $A bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast --out $R/fasttcp-gencore-$i.json > $R/fasttcp-gencore-$i.txt 2>&1
  $A bench fastpath --experiments tcp --forwarders kernel,kernel_norps,fast --fast-cpus 1 --out $R/fasttcp-cpumap-$i.json > $R/fasttcp-cpumap-$i.txt 2>&1
done
t done
