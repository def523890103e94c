#!/bin/bash
# One GPU-machine session (two H200s of one host, or one): the node first (both GPUs), then
# gpu-latency on the second GPU in the background while GPU 0 runs the GPU tests, gpu-cache and
# gpu-l2-cache, and the benchmark record (3 cold runs, the first with an empty Triton cache; 2
# without latency), one run without precompiling, one under cProfile, compare and history of the
# runs. Everything lands in $OUT/h200.tgz; a short table is printed last.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
SMI="nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current,persistence_mode --format=csv"
$SMI > $EX/nvidia-smi.csv 2>&1
N=$(nvidia-smi -L | wc -l)
export TRITON_CACHE_DIR=$(mktemp -d)
if [ "$N" -ge 2 ]; then
  /usr/bin/time -f "node wall %e s" python3 -m detect_caches --gpu all --out $EX/node > $EX/node.log 2>&1; echo "node rc=$?" >> $EX/node.log
  tail -3 $EX/node.log
  bash .peers/run-gpu-benches.sh $EX/peers1 1 gpu-latency > $EX/peers1.log 2>&1 &
  LAT=$!
fi
DETECT_CACHES_GPU_TESTS=1 timeout 300 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log; tail -2 $EX/gpu-tests.log
bash .peers/run-gpu-benches.sh $EX/peers0 0 gpu-cache gpu-l2-cache > $EX/peers0.log 2>&1; tail -4 $EX/peers0.log
unset TRITON_CACHE_DIR
python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --no-latency-runs 2 --peers $EX/peers0 --out $EX/bench > $EX/bench.log 2>&1
TRITON_CACHE_DIR=$(mktemp -d) DETECT_CACHES_PRECOMPILE=0 /usr/bin/time -f "no-precompile wall %e s" \
  python3 -m detect_caches --gpu 0 --quiet --out $EX/no-precompile > $EX/no-precompile.log 2>&1
# where the main thread's time goes in a run without latency (cProfile sees the main thread only)
python3 -m cProfile -o $EX/profile.out -m detect_caches --gpu 0 --quiet --no-latency --out $EX/profiled > /dev/null 2>&1
python3 -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(45)" $EX/profile.out > $EX/profile.txt 2>&1
rm -f $EX/profile.out
for i in 2 3; do python3 -m detect_caches compare $EX/bench/run1/result.json $EX/bench/run$i/result.json > $EX/compare-1-$i.md 2>&1; echo "exit $?" >> $EX/compare-1-$i.md; done
python3 -m detect_caches history $EX/bench $EX/node --out $EX/history > $EX/history.log 2>&1; echo "history exit $?" >> $EX/history.log
[ -n "${LAT:-}" ] && wait $LAT
[ -d $EX/peers1 ] && cp $EX/peers1/gpu-latency.txt $EX/peers0/ 2>/dev/null
python3 benchmarks/bench_detect.py --report-only $EX/bench --peers $EX/peers0 > /dev/null 2>&1
$SMI >> $EX/nvidia-smi.csv 2>&1
cat $EX/bench/bench.md | head -70; tail -1 $EX/no-precompile.log; tail -2 $EX/compare-1-*.md; tail -2 $EX/history.log
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
