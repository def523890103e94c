#!/bin/bash
# The last GPU call of the fourth session (2026-11-30): GPU tests, gpu-l2-cache beside the tool,
# 2 cold runs without latency (the first with an empty Triton cache) and 3 with (the benchmark
# record); then, without the background precompiling, one run with latency (empty cache) and one
# without (warm cache): what the precompiling saves or costs; compare; last gpu-latency (~6 min)
# on the same card, and the benchmark record rendered again with its latencies beside ours.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
SMI="nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current,persistence_mode --format=csv"
$SMI > $EX/nvidia-smi.csv 2>&1
DETECT_CACHES_GPU_TESTS=1 timeout 200 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log; tail -1 $EX/gpu-tests.log
timeout 60 bash .peers/run-gpu-benches.sh $EX/peers 0 gpu-l2-cache > $EX/peers.log 2>&1; tail -2 $EX/peers.log
timeout 300 python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --no-latency-runs 2 --no-latency-first --peers $EX/peers --out $EX/bench > $EX/bench.log 2>&1
DETECT_CACHES_PRECOMPILE=0 timeout 60 python3 benchmarks/bench_detect.py --gpu 0 --runs 1 --no-latency-runs 1 --out $EX/no-precompile > $EX/no-precompile.log 2>&1
for i in 2 3; do python3 -m detect_caches compare $EX/bench/run1/result.json $EX/bench/run$i/result.json > $EX/compare-1-$i.md 2>&1; echo "exit $?" >> $EX/compare-1-$i.md; done
$SMI >> $EX/nvidia-smi.csv 2>&1
timeout 400 bash .peers/run-gpu-benches.sh $EX/peers 0 gpu-latency > $EX/peers-latency.log 2>&1; tail -1 $EX/peers-latency.log
python3 benchmarks/bench_detect.py --report-only $EX/bench --peers $EX/peers > $EX/bench-report.log 2>&1
head -70 $EX/bench/bench.md; grep "^| full\|^| --no" $EX/no-precompile/bench.md; tail -1 $EX/compare-1-2.md $EX/compare-1-3.md; tail -3 $EX/bench.log
for r in run1 run2 run3 no-latency1 no-latency2; do grep -o "a cliff between[^:]*\|sector 32 B[^;]*" $EX/bench/$r/report.md | head -2; done
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
