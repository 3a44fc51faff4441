#!/bin/sh
# LOCK: the bench lock file (flock), shared with every bench run on the machine
# three runs, forwarders rotated; each under the bench lock
BIN=target/release/vrhost
D=results/tcp-0730-busy
i=0
for order in kernel,af_xdp,af_xdp_txlive af_xdp,af_xdp_txlive,kernel af_xdp_txlive,kernel,af_xdp; do
  i=$((i+1))
  flock "$LOCK" $BIN bench forward --forwarders $order --loads 1 --seconds 0.5 --warmup 0.2 --pings 0 --idle-pings 0 --tcp-seconds 3 --out $D/ab$i.json > $D/ab$i.txt 2>&1
  uptime >> $D/ab$i.txt
done
