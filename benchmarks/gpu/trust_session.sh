#!/usr/bin/env bash
# Issue 19's device calls (the parent-driven protocol). Usage on the GPU box: OUT=dir bash benchmarks/gpu/trust_session.sh STEP...
# STEP: corpus (prebuild + the GPU corpus), clocks (parent clock vs device events over the examples),
# parts (the examples where identical code parted from 1.0x, and KernelBench's 19_ReLU from .kb, each batch's device
# time by part in both jobs: carry .kb), legit (the seven legitimate GPU candidates and the three side-stream exploits),
# fidelity (5 evaluations per case + triton do_bench), latency (cache-hit turn latency).
set -u
export PYTHONPATH=$PWD KSTUDIO_CACHE_DIR=${KSTUDIO_CACHE_DIR:-/root/kscache}
OUT=${OUT:-/tmp/trust}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
for step in "$@"; do
  started=$(date +%s)
  echo "== $step $(date +%T)"
  case $step in
    corpus) bash benchmarks/gpu_acceptance.sh corpus ;;
    clocks) timeout 560 python3 benchmarks/trust_clocks.py --json "$OUT/clocks.json" 2> "$OUT/clocks.err" | tail -22; tail -5 "$OUT/clocks.err" ;;
    parts)
      timeout 300 python3 benchmarks/trust_clocks.py --device cuda --only row_sum,row_max,relu_scale_bias,softmax_rows,layer_norm \
        --parts --trace "$OUT/parts.jsonl" --json "$OUT/parts.json" 2>&1 | grep "^|"
      [ -f .kb/level1/19_ReLU.py ] && timeout 150 python3 benchmarks/trust_clocks.py --device cuda --only none \
        --problem .kb/level1/19_ReLU.py --parts --trace "$OUT/parts_relu.jsonl" 2>&1 | grep "^|" ;;
    legit)
      timeout 400 python3 benchmarks/probes/trust_smoke.py --device cuda legit_cuda_silu_bias:elementwise_silu_bias_gpu \
        legit_cuda_softmax_rows:softmax_rows_gpu legit_cuda_linear_relu:linear_relu_gpu legit_cuda_sum_rows:sum_rows_gpu \
        legit_nvrtc_silu_bias:elementwise_silu_bias_gpu legit_triton_silu_bias:elementwise_silu_bias_gpu \
        legit_triton_softmax_rows:softmax_rows_gpu exploit_cuda_side_stream:elementwise_silu_bias_gpu \
        exploit_nvrtc_side_stream:elementwise_silu_bias_gpu exploit_triton_side_stream:elementwise_silu_bias_gpu 2>&1 \
        | grep -v "SANDBOX WITHOUT" | grep -E "^[a-z]" ;;
    fidelity) timeout 560 python3 benchmarks/timing_fidelity.py --repeats 5 --json "$OUT/fidelity.json" 2>&1 | tail -8 ;;
    latency) timeout 300 python3 benchmarks/turn_latency.py --device cuda --backends cuda --repeats 5 --json "$OUT/latency.json" 2> "$OUT/latency.err" | tail -8 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "step $step: $(( $(date +%s) - started )) s"
done
