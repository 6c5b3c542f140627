#!/usr/bin/env bash
# Runs the GPU fault cases of the corpus while recording the process tree and GPU apps every 10 s,
# then dumps every Python thread's stack (faulthandler) if pytest is still running. For the GPU box.
set -u
export PYTHONPATH=$PWD KSTUDIO_CACHE_DIR=${KSTUDIO_CACHE_DIR:-/root/kscache} PYTHONFAULTHANDLER=1
OUT=${OUT:-/tmp/diagnose}
ls tests/corpus/candidates/fault_cuda_*.py | xargs -P 4 -n 1 python3 -m agent build --device cuda > "$OUT/prebuild_fault.log" 2>&1
python3 -m pytest tests/agent/engine/evaluate/test_corpus.py -k "cuda-fault" -v -s -p no:cacheprovider --timeout 150 > "$OUT/fault.log" 2>&1 &
PYTEST=$!
for i in $(seq 1 ${1:-24}); do
  sleep 10
  { date +%T; ps -eo pid,ppid,stat,wchan:28,etimes,args --forest | grep -E "pytest|zygote|agent" | grep -v grep | cut -c1-200;
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; } >> "$OUT/ps.log"
  kill -0 $PYTEST 2>/dev/null || break
done
if kill -0 $PYTEST 2>/dev/null; then kill -ABRT $PYTEST; sleep 3; echo "pytest was still running: stacks dumped"; fi
grep -E "^VERDICT|PASSED|FAILED|Timeout|passed|failed" "$OUT/fault.log" | cut -c1-400
