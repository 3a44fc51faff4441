#!/bin/sh
# A/B of `[host.poll] tx_batch` under TCP: A = 0 (a run after every round
# that sent, the flush before), B = 64 (with tx_wait_us 50: the
# defaults when this ran; the default is now 0),
# C = 256 with tx_wait_us 100; three alternations, forwarders rotated,
# each run under the bench lock.
# BIN: the release vrhost; LOCK: the bench lock file; D: output directory.
BIN=${BIN:-target/release/vrhost}
D=${D:-results/tcpx-busy}
i=0
for order in kernel,af_xdp,af_xdp_txlive af_xdp_txlive,kernel,af_xdp af_xdp,af_xdp_txlive,kernel; do
  i=$((i+1))
  for ab in A B C; do
    case $ab in
      A) X="--tx-batch 0" ;;
      B) X="--tx-batch 64 --tx-wait-us 50" ;;
      C) X="--tx-batch 256 --tx-wait-us 100" ;;
    esac
    flock "$LOCK" $BIN bench forward --forwarders $order --loads 1 --seconds 0.5 --warmup 0.2 --pings 0 --idle-pings 0 --tcp-seconds 3 $X --out $D/ab$i$ab.json > $D/ab$i$ab.txt 2>&1
    uptime >> $D/ab$i$ab.txt
  done
done
