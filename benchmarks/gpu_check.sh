#!/bin/bash
# One GPU call of the fourth session (2026-11-30): GPU tests, the L2/L1 transfer-unit exploration
# (explore_sector.py), gpu-l2-cache for the L2 and memory ratios on this card, 3 cold runs with
# latency and 1 without (the benchmark record, its split now with the exit), compare.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
SMI="nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current,persistence_mode --format=csv"
$SMI > $EX/nvidia-smi.csv 2>&1
git log -1 --format='commit %H %s' > $EX/commit.txt 2>/dev/null; git status --short >> $EX/commit.txt 2>/dev/null
DETECT_CACHES_GPU_TESTS=1 timeout 200 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log; tail -1 $EX/gpu-tests.log
timeout 120 python3 benchmarks/explore_sector.py --gpu 0 --json $EX/sector.json > $EX/sector.log 2>&1; cat $EX/sector.log | tail -25
timeout 60 bash .peers/run-gpu-benches.sh $EX/peers 0 gpu-l2-cache > $EX/peers.log 2>&1; tail -2 $EX/peers.log
timeout 300 python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --no-latency-runs 1 --peers $EX/peers --out $EX/bench > $EX/bench.log 2>&1
for i in 2 3; do python3 -m detect_caches compare $EX/bench/run1/result.json $EX/bench/run$i/result.json > $EX/compare-1-$i.md 2>&1; echo "exit $?" >> $EX/compare-1-$i.md; done
$SMI >> $EX/nvidia-smi.csv 2>&1
head -60 $EX/bench/bench.md; tail -2 $EX/compare-1-2.md $EX/compare-1-3.md; tail -5 $EX/bench.log
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
