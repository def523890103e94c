#!/bin/bash
# Exploration call for issue 18 (fifth session, 2026-11-30): where a fresh process's start-up
# goes (bytecode, torch's import, CUDA context, NVML, Triton) and what overlapping them saves;
# then a warm `--no-latency` run with every thread's stack sampled.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
nvidia-smi --query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu --format=csv > $EX/nvidia-smi.csv 2>&1
timeout 200 python3 benchmarks/explore_startup.py --repeats 3 > $EX/startup.log 2>&1
S0=$(date +%s.%N)
timeout 60 python3 -m detect_caches --gpu 0 --no-latency --out $EX/cold > $EX/cold.log 2>&1
S1=$(date +%s.%N)
timeout 60 python3 -m detect_caches --gpu 0 --no-latency --out $EX/warm > $EX/warm.log 2>&1
S2=$(date +%s.%N)
timeout 60 python3 benchmarks/sample_run.py $EX/profile-no-latency.txt --gpu 0 --no-latency --out $EX/sampled > $EX/sampled.log 2>&1
S3=$(date +%s.%N)
timeout 60 python3 benchmarks/sample_run.py $EX/profile-full.txt --gpu 0 --out $EX/sampled-full > $EX/sampled-full.log 2>&1
echo "wall: cold no-latency $(echo "$S1 - $S0" | bc) s, warm no-latency $(echo "$S2 - $S1" | bc) s, sampled $(echo "$S3 - $S2" | bc) s" | tee $EX/walls.txt
cat $EX/startup.log | cut -c1-400
head -75 $EX/profile-no-latency.txt | cut -c1-220
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
