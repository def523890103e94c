#!/bin/bash
# HBM launch candidates at 960 MiB and 2 GiB, then the 3-run benchmark record; $OUT/h200.tgz.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $EX/nvidia-smi.csv 2>&1
timeout 150 python3 benchmarks/explore_launch.py --gpu 0 --levels HBM --no-device-timing --out $EX/explore-hbm.json > $EX/explore-hbm.log 2>&1
python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['rows']; [print(x['level'], x['programs'], x['block_size'], x['num_warps'], round(x['bandwidth_gbs'])) for x in sorted(r, key=lambda x: -x['bandwidth_gbs'])[:8]]" $EX/explore-hbm.json
python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --out $EX/bench 2>&1 | tail -12 > $EX/bench.log; cat $EX/bench.log
grep -A4 "Peak probes" $EX/bench/run1/report.md
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> $EX/nvidia-smi.csv 2>&1
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
