#!/bin/bash
# Launch exploration and a noisy-neighbour trial on the GPU machine; everything under $OUT/explore.tgz.
set -u
OUT=${OUT:-/tmp/out}
EX=$OUT/explore
mkdir -p $EX
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > $EX/nvidia-smi.csv 2>&1
DETECT_CACHES_GPU_TESTS=1 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log
timeout 240 python3 benchmarks/explore_launch.py --gpu 0 --out $EX/explore.json > $EX/explore.log 2>&1
tail -12 $EX/explore.log
if [ "${NOISY:-0}" = 1 ]; then
  python3 benchmarks/noisy_neighbour.py --gpu 0 --seconds 45 > $EX/neighbour.log 2>&1 &
  sleep 8
  ( time python3 -m detect_caches --gpu 0 --quiet --out $EX/noisy ) > $EX/noisy.log 2>&1
  wait
  cat $EX/neighbour.log $EX/noisy.log | tail -25
fi
cd $OUT && tar czf explore.tgz explore && rm -rf explore
