#!/bin/sh
# A/B of ports[].tx_socket_below (0, the default, against 32), alternated.
# usage: ab.sh RUNS BIN
n=$1; bin=$2
for i in $(seq 1 $n); do
  for below in 0 32; do
    echo "=== run $i tx_socket_below $below $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
    $bin bench forward --forwarders kernel,af_xdp_txlive --generator live --frame-bytes 1500 --loads 1 \
      --pings 0 --idle-pings 0 --tcp-seconds 3 --tx-socket-below $below --json --out ab-$i-$below.json 2>&1 | tail -n 40
  done
done
