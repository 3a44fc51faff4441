#!/bin/bash
B=${VRHOST:-vrhost}
O=${OUT:-.}
for i in 4 5 6 7; do
  for hp in off auto; do
    echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg) run $i $hp" >> $O/log
    perf stat -x, -e minor-faults,context-switches --inherit -o $O/perf-$hp-$i.txt \
      $B bench memory --modes shm --vrs 1,10,100 --repeat 2 --seconds 1.5 --warmup 0.5 \
      --no-idle --no-idle-beside --no-pool-sweep --hugepages $hp --json > $O/mem-$hp-$i.json 2> $O/mem-$hp-$i.err
  done
done
for i in 3 4 5; do
  for pool in 1024 128 64; do
    echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg) pool $i $pool" >> $O/log
    $B bench memory --modes shm --vrs 1,100 --pool $pool --repeat 2 --seconds 1.5 --warmup 0.5 \
      --no-idle --no-idle-beside --no-pool-sweep --json > $O/pool-$pool-$i.json 2> $O/pool-$pool-$i.err
  done
done
echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg) done" >> $O/log
