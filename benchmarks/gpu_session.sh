#!/bin/bash
# One GPU-machine session: GPU tests, three cold detections per timing method (the benchmark
# record), the two timings side by side, a run beside a second GPU workload, `--gpu all` and the
# torchrun path with one rank. Everything lands in $OUT/h200.tgz.
set -u
OUT=${OUT:-/tmp/out}
EX=$OUT/h200
mkdir -p $EX
SMI="nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv"
$SMI > $EX/nvidia-smi.csv 2>&1
DETECT_CACHES_GPU_TESTS=1 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log
tail -2 $EX/gpu-tests.log
python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --out $EX/bench 2>&1 | tail -12 > $EX/bench.log
cat $EX/bench.log
python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --timing device --out $EX/bench-device 2>&1 | tail -10 > $EX/bench-device.log
cat $EX/bench-device.log
python3 -m detect_caches compare $EX/bench/run1/result.json $EX/bench/run2/result.json > $EX/compare.md 2>&1; echo "compare rc=$?" >> $EX/compare.md
tail -3 $EX/compare.md
timeout 120 python3 benchmarks/compare_timing.py --gpu 0 --points $EX/bench/run1/measurements.csv --out $EX/timing > $EX/timing.log 2>&1
timeout 60 python3 benchmarks/clock_spread.py --gpu 0 > $EX/clock-spread.log 2>&1; cat $EX/clock-spread.log
tail -12 $EX/timing.log
python3 benchmarks/noisy_neighbour.py --gpu 0 --seconds 40 > $EX/neighbour.log 2>&1 &
sleep 8
python3 -m detect_caches --gpu 0 --quiet --out $EX/noisy > $EX/noisy.log 2>&1; echo "noisy rc=$?" >> $EX/noisy.log
wait
tail -8 $EX/noisy.log
python3 -m detect_caches --gpu all --out $EX/node > $EX/node.log 2>&1; echo "node rc=$?" >> $EX/node.log
tail -4 $EX/node.log
timeout 120 python3 -m torch.distributed.run --nproc-per-node 1 -m detect_caches --out $EX/fleet --quiet > $EX/torchrun.log 2>&1; echo "torchrun rc=$?" >> $EX/torchrun.log
grep -A4 "Fleet report" $EX/torchrun.log; tail -1 $EX/torchrun.log
$SMI >> $EX/nvidia-smi.csv 2>&1
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
