#!/bin/sh
# alternate --tcp-gro gen / ends; TCP only (a short UDP point)
B=${B:-vrhost}
for i in 1 2; do
  for g in gen ends; do
    timeout 400 $B bench forward --forwarders kernel,af_xdp,af_xdp_txlive --generator live --frame-bytes 64 --loads 0.25 --seconds 0.5 --warmup 0.2 --pings 0 --idle-pings 0 --tcp-seconds 3 --tcp-gro $g > out/gro-$g-$i.txt 2> out/gro-$g-$i.err
    echo "== $g $i $(date -u +%T) load $(cut -d' ' -f1 /proc/loadavg)"; grep -A4 "^TCP against" out/gro-$g-$i.txt; grep "^tcp" out/gro-$g-$i.err | cut -c1-200
  done
done
