#!/usr/bin/env bash
# One device call: the scripted multi-turn agent run through the real GPU tools (issue 4), then the
# built-in policy over examples/ (issue 5). Results land in $OUT; the tail of stdout is the summary.
# Usage on the GPU box: [FIDELITY=1] bash benchmarks/gpu/session4.sh [ONLY_EXAMPLES]
# (FIDELITY=1 first runs benchmarks/timing_fidelity.py, issue 2's timing-fidelity check.)
set -u
export PYTHONPATH=$PWD KSTUDIO_CACHE_DIR=/root/kscache
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name())'
if [ -n "${FIDELITY:-}" ]; then
  python3 benchmarks/timing_fidelity.py --repeats 5 --json $OUT/fidelity.json 2>&1 | tail -12
fi
if [ -z "${1:-}" ]; then
  C=tests/corpus/candidates
  start=$(date +%s)
  timeout 240 python3 -m agent optimize tests/corpus/problems/elementwise_silu_bias_gpu.py --device cuda \
    --script $C/fault_py_wrong_shape.py $C/legit_cuda_silu_bias_two_pass.py $C/legit_cuda_silu_bias.py \
    --json > $OUT/scripted.json 2> $OUT/scripted.err
  echo "scripted run: exit $? in $(( $(date +%s) - start )) s"
  grep '^turn' $OUT/scripted.err
  tail -c 600 $OUT/scripted.json; echo
fi
python3 benchmarks/builtin_policy.py --device cuda --max-turns 8 --timeout 150 --out $OUT/builtin.json \
  ${1:+--only $1} 2> $OUT/builtin.err | tee $OUT/builtin.md
grep -v '\.\.\.$' $OUT/builtin.err | tail -20
