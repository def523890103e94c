#!/bin/bash
# The last GPU call of the fifth session (2026-11-30), on a two-GPU host: the GPU tests,
# gpu-l2-cache beside the tool on GPU 0, the last session's code (.before, commit 56b5883) and
# this one, each from empty caches (Triton's and the bytecode cache) then warm, one card, and
# the node of both GPUs with and without latency for each.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
ROOT=$PWD
BEFORE_PATH=${PYTHONPATH/$ROOT/$ROOT/.before}
SMI="nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,ecc.mode.current,persistence_mode --format=csv"
$SMI > $EX/nvidia-smi.csv 2>&1
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$@"; }
node() {  # node TAG DIR PYTHONPATH [extra args]: one timed `--gpu all`
    local tag=$1 dir=$2 pp=$3; shift 3
    local s=$(date +%s.%N)
    (cd $dir && PYTHONPATH=$pp timeout 120 python3 -m detect_caches --gpu all --quiet --out $EX/node-$tag "$@" > $EX/node-$tag.log 2>&1; echo "exit $?" >> $EX/node-$tag.log)
    echo "node $tag: $(secs $s $(date +%s.%N)) s, $(tail -1 $EX/node-$tag.log)" | tee -a $EX/node.txt
}
DETECT_CACHES_GPU_TESTS=1 timeout 240 python3 -m pytest -m gpu -q tests/test_gpu.py 2>&1 | tail -15 > $EX/gpu-tests.log; tail -1 $EX/gpu-tests.log
timeout 90 bash .peers/run-gpu-benches.sh $EX/peers 0 gpu-l2-cache > $EX/peers.log 2>&1; tail -2 $EX/peers.log
(cd .before && PYTHONPATH=$BEFORE_PATH timeout 200 python3 benchmarks/bench_detect.py --gpu 0 --runs 1 --no-latency-runs 2 --no-latency-first --peers $EX/peers --out $EX/before > $EX/before.log 2>&1)
node before-no-latency $ROOT/.before $BEFORE_PATH --no-latency
node before $ROOT/.before $BEFORE_PATH
timeout 240 python3 benchmarks/bench_detect.py --gpu 0 --runs 3 --no-latency-runs 2 --no-latency-first --peers $EX/peers --out $EX/after > $EX/after.log 2>&1
node after-no-latency $ROOT $PYTHONPATH --no-latency
node after $ROOT $PYTHONPATH
node after-no-latency-2 $ROOT $PYTHONPATH --no-latency
for i in 2 3; do python3 -m detect_caches compare $EX/after/run1/result.json $EX/after/run$i/result.json > $EX/compare-1-$i.md 2>&1; echo "exit $?" >> $EX/compare-1-$i.md; done
$SMI >> $EX/nvidia-smi.csv 2>&1
for v in before after; do echo "== $v"; sed -n 5,40p $EX/$v/bench.md | cut -c1-1200; done
tail -1 $EX/compare-1-2.md $EX/compare-1-3.md
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
