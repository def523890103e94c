#!/bin/bash
# Check call for issue 18 (fifth session): the last session's code (.before, commit 56b5883) and
# this one side by side on one card, each `--no-latency` from empty caches (Triton, and the
# bytecode cache where the code has one), then warm; then sampled runs of this code from empty
# caches and warm, to see what is left.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
ROOT=$PWD
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv > $EX/nvidia-smi.csv 2>&1
python3 -c "import sys, torch; print('torch imports triton:', 'triton' in sys.modules)" > $EX/imports.txt 2>&1
(cd .before && PYTHONPATH=${PYTHONPATH/$ROOT/$ROOT/.before} timeout 150 python3 benchmarks/bench_detect.py --gpu 0 --runs 1 --no-latency-runs 2 --no-latency-first --out $EX/before > $EX/before.log 2>&1)
timeout 150 python3 benchmarks/bench_detect.py --gpu 0 --runs 1 --no-latency-runs 2 --no-latency-first --out $EX/after > $EX/after.log 2>&1
export TRITON_CACHE_DIR=$(mktemp -d) DETECT_CACHES_BYTECODE_CACHE=$(mktemp -d)
timeout 60 python3 benchmarks/sample_run.py $EX/profile-empty.txt --gpu 0 --no-latency --out $EX/sampled-empty > $EX/sampled-empty.log 2>&1
timeout 60 python3 benchmarks/sample_run.py $EX/profile-warm.txt --gpu 0 --no-latency --out $EX/sampled-warm > $EX/sampled-warm.log 2>&1
cat $EX/imports.txt
for v in before after; do echo "== $v"; sed -n 5,12p $EX/$v/bench.md | cut -c1-900; done
head -4 $EX/profile-empty.txt; head -4 $EX/profile-warm.txt
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
