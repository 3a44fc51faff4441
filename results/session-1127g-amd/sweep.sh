#!/bin/bash
for r in 1 2; do for iv in 0.002 0.005 0.01 0.02 0.05 0.2; do
 vrhost bench forward --forwarders kernel,af_xdp --generator live --loads 0.25 --pings 100 --ping-interval $iv --idle-pings 0 --tcp-seconds 0 --seconds 1 --json > sweep/r$r-iv$iv.txt 2>&1
 echo "r$r iv $iv $(grep -E '^ping' sweep/r$r-iv$iv.txt | awk '{print $8}' | tr '\n' ' ')"
done; done
