#!/bin/sh
# 64-byte rate, CPU per frame and ping of af_xdp_txlive with the live
# generator: A = `--tx-batch 0` (the flush before), B = `--tx-batch 64` (the
# default when this ran, with tx_wait_us 50);
# three alternations, each run under the bench lock.
# BIN: the release vrhost; LOCK: the bench lock file; D: output directory.
BIN=${BIN:-target/release/vrhost}
D=${D:-results/tcpx-busy}
for i in 1 2 3; do
  for ab in A B; do
    if [ $ab = A ]; then X="--tx-batch 0"; else X="--tx-batch 64 --tx-wait-us 50"; fi
    flock "$LOCK" $BIN bench forward --forwarders af_xdp_txlive --generator live --loads 0.25,1 --seconds 2 --warmup 0.5 --pings 20 --idle-pings 0 --tcp-seconds 0 $X --out $D/udp$i$ab.json > $D/udp$i$ab.txt 2>&1
    uptime >> $D/udp$i$ab.txt
  done
done
