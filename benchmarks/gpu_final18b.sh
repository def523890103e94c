#!/bin/bash
# Last GPU call of the fifth session, one H200: after the switch-interval change, the GPU tests,
# gpu-l2-cache beside the tool, the last session's code (.before, 56b5883) and this one, each
# from empty caches (Triton's, and the bytecode cache where the code has one) then warm.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
ROOT=$PWD
BEFORE_PATH=${PYTHONPATH/$ROOT/$ROOT/.before}
SMI="nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current,persistence_mode --format=csv"
$SMI > $EX/nvidia-smi.csv 2>&1
DETECT_CACHES_GPU_TESTS=1 timeout 240 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log; tail -1 $EX/gpu-tests.log
timeout 90 bash .peers/run-gpu-benches.sh $EX/peers 0 gpu-l2-cache > $EX/peers.log 2>&1; tail -2 $EX/peers.log
(cd .before && PYTHONPATH=$BEFORE_PATH timeout 200 python3 benchmarks/bench_detect.py --gpu 0 --runs 1 --no-latency-runs 2 --no-latency-first --peers $EX/peers --out $EX/before > $EX/before.log 2>&1)
timeout 240 python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --no-latency-runs 2 --no-latency-first --peers $EX/peers --out $EX/after > $EX/after.log 2>&1
for i in 2 3; do python3 -m detect_caches compare $EX/after/run1/result.json $EX/after/run$i/result.json > $EX/compare-1-$i.md 2>&1; echo "exit $?" >> $EX/compare-1-$i.md; done
$SMI >> $EX/nvidia-smi.csv 2>&1
for v in before after; do echo "== $v"; sed -n 5,12p $EX/$v/bench.md | cut -c1-700; done
grep -A8 "^Against" $EX/after/bench.md; grep -A9 "^Repeat" $EX/after/bench.md
for f in $EX/compare-1-2.md $EX/compare-1-3.md; do tail -1 $f; done
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
