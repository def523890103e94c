#!/bin/bash
# One GPU-machine session: GPU tests, three full detections (the benchmark record) and a
# compare of two of them. Everything lands under $OUT. Optional: EXPLORE=1 SEED=1.
set -u
OUT=${OUT:-/tmp/out}
EX=$OUT/h200
mkdir -p $EX
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $EX/nvidia-smi.csv 2>&1
DETECT_CACHES_GPU_TESTS=1 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tee $EX/gpu-tests.log | tail -5
if [ "${SEED:-0}" = 1 ]; then
  ( time python3 -m detect_caches benchmark --test-name seed_default --results-dir $EX/seed ) 2>&1 | tail -25 | tee $EX/seed-benchmark.log
fi
if [ "${EXPLORE:-0}" = 1 ]; then
  timeout 150 python3 benchmarks/explore_launch.py --gpu 0 --out $EX/explore.json 2>&1 | tee $EX/explore.log | tail -8
fi
python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --out $EX/bench 2>&1 | tee $EX/bench.log
python3 -m detect_caches compare $EX/bench/run1/result.json $EX/bench/run2/result.json > $EX/compare.md 2>&1; echo "compare rc=$?" >> $EX/compare.md
cat $EX/compare.md
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv >> $EX/nvidia-smi.csv 2>&1
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
