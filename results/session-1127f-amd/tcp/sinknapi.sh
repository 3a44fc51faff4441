#!/bin/sh
# while a bench runs: the sink's eth0 NAPI in a kernel thread on CPU 0
while [ ! -f ./sinknapi.stop ]; do
  if ip netns exec vrhb-sink sh -c 'echo 1 > /sys/class/net/eth0/threaded' 2>/dev/null; then
    for p in $(pgrep -f '^\[?napi/'); do taskset -pc 0 $p >/dev/null 2>&1; done
  fi
  sleep 0.1
done
