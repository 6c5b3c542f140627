#!/usr/bin/env bash
# Issue 19's device calls (the parent-driven protocol). Usage on the GPU box: OUT=dir bash benchmarks/gpu/trust_session.sh STEP...
# STEP: corpus (prebuild + the GPU corpus), clocks (parent clock vs device events over the examples),
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
    fidelity) timeout 560 python3 benchmarks/timing_fidelity.py --repeats 5 --json "$OUT/fidelity.json" 2>&1 | tail -8 ;;
    latency) timeout 300 python3 benchmarks/turn_latency.py --device cuda --backends cuda --repeats 5 --json "$OUT/latency.json" 2> "$OUT/latency.err" | tail -8 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "step $step: $(( $(date +%s) - started )) s"
done
