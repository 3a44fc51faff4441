#!/bin/bash
# $1 forwarder, $2 out prefix, $3 defer, $4 timeout ns
vrhost bench forward --forwarders $1 --generator live --frame-bytes 1500 --loads 0.25 --pings 0 --idle-pings 0 --tcp-seconds 6 --seconds 1 --tcp-placements pinned > $2-run.txt 2>&1 &
for i in $(seq 1 600); do pgrep -f "iperf3 -c" >/dev/null && break; sleep 0.05; done
ns=$(ip netns list | awk '{print $1}' | grep sink | head -1)
ip netns exec $ns sh -c "echo $3 > /sys/class/net/eth0/napi_defer_hard_irqs; echo $4 > /sys/class/net/eth0/gro_flush_timeout; cat /sys/class/net/eth0/napi_defer_hard_irqs /sys/class/net/eth0/gro_flush_timeout"
sleep 1.5
perf record -C 1 -g -o $2.data -e cpu-clock -- sleep 2 2>/dev/null >/dev/null
wait
perf script -i $2.data 2>/dev/null | awk '{for(i=1;i<=NF;i++){if($i ~ /^dev=/)d=$i; if($i ~ /^len=/)l=substr($i,5)}; ev=$5; key=ev" "d; n[key]++; if(l+0>1600) big[key]++} END{for(k in n) print k, n[k], big[k]+0}' | sort
grep "^tcp" $2-run.txt
