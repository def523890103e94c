#!/bin/bash
# Cold runs only (fifth session): `--no-latency` on empty caches, three rounds of the last
# session's code (.before), this code (empty Triton and bytecode caches) and this code with its
# bytecode cache off (empty Triton cache), interleaved: what a first run after install costs.
# `gpu_cold18.sh after`: without the last session's code, and two warm runs at the end.
set -u
OUT=${OUT:-/tmp/out}; EX=$OUT/h200; mkdir -p $EX
ROOT=$PWD
BEFORE_PATH=${PYTHONPATH/$ROOT/$ROOT/.before}
nvidia-smi --query-gpu=index,name,uuid,clocks.max.sm,temperature.gpu --format=csv > $EX/nvidia-smi.csv 2>&1
secs() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$@"; }
one() {  # one TAG DIR PYTHONPATH BYTECODE_SETTING
    local tag=$1 dir=$2 pp=$3 bc=$4 s
    [ "$bc" = fresh ] && bc=$(mktemp -d)
    s=$(date +%s.%N)
    (cd $dir && TRITON_CACHE_DIR=$(mktemp -d) DETECT_CACHES_BYTECODE_CACHE=$bc PYTHONPATH=$pp timeout 60 \
        python3 -m detect_caches --gpu 0 --no-latency --quiet --out $EX/$tag > $EX/$tag.log 2>&1)
    echo "$tag $(secs $s $(date +%s.%N)) s exit $?" | tee -a $EX/cold.txt
}
MODE=${1:-all}
for i in 1 2 3; do
    [ "$MODE" = after ] || one before-$i $ROOT/.before $BEFORE_PATH 0
    one after-$i $ROOT $PYTHONPATH fresh
    one after-nocache-$i $ROOT $PYTHONPATH 0
done
if [ "$MODE" = after ]; then
    W=$(mktemp -d); T=$(mktemp -d)
    for i in 0 1 2; do   # the first fills the caches
        s=$(date +%s.%N)
        TRITON_CACHE_DIR=$T DETECT_CACHES_BYTECODE_CACHE=$W timeout 60 python3 -m detect_caches --gpu 0 --no-latency --quiet --out $EX/warm-$i > $EX/warm-$i.log 2>&1
        echo "warm-$i $(secs $s $(date +%s.%N)) s exit $?" | tee -a $EX/cold.txt
    done
fi
cd $OUT && tar czf h200.tgz h200 && rm -rf h200
