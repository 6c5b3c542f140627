#!/usr/bin/env bash
# Session 5's device calls. Usage on the GPU box: bash benchmarks/gpu/session5.sh STEP...
# STEP: probe (timing protocol knobs, 3 fresh processes per candidate), stage_a (issue 7),
# builtin:NAMES (the built-in policy over examples, comma-separated names), fidelity, latency,
# pytest:PATHS (GPU tests, e.g. pytest:tests/agent/engine/evaluate/test_tensor_file.py).
set -u
export PYTHONPATH=$PWD KSTUDIO_CACHE_DIR=/root/kscache
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for step in "$@"; do
  echo "== $step $(date +%T)"
  case $step in
    probe)
      for c in "legit_cuda_silu_bias.py elementwise_silu_bias_gpu.py" "legit_cuda_softmax_rows.py softmax_rows_gpu.py"; do
        set -- $c
        for k in 1 2 3; do
          timeout 200 python3 benchmarks/probes/timing_probe.py tests/corpus/candidates/$1 tests/corpus/problems/$2 | tee -a $OUT/probe.jsonl
        done
      done ;;
    stage_a)
      timeout 380 bash benchmarks/gpu/trainer_stage_a.sh 2>&1 | tee $OUT/stage_a.txt | tail -40 ;;
    builtin:*)
      python3 benchmarks/builtin_policy.py --device cuda --max-turns 8 --timeout 150 --prebuild 14 --out $OUT/builtin.json \
        --only ${step#builtin:} 2> $OUT/builtin.err | tee $OUT/builtin.md
      grep -v '\.\.\.$' $OUT/builtin.err | tail -20 ;;
    fidelity)
      python3 benchmarks/timing_fidelity.py --repeats 5 --json $OUT/fidelity.json 2>&1 | tail -12 ;;
    latency)
      python3 benchmarks/turn_latency.py --device cuda --backends cuda,nvrtc,triton --repeats 5 --json $OUT/latency.json \
        2> $OUT/latency.err | tail -8 ;;
    pytest:*)
      python3 -c 'import pytest' 2>/dev/null || { python3 -m pip install -q --no-index --no-deps --target /tmp/pyt .whl/pytest/*.whl \
        && export PYTHONPATH=$PYTHONPATH:/tmp/pyt; }
      python3 -m pytest -q -p no:cacheprovider ${step#pytest:} 2>&1 | tail -15 ;;
  esac
done
