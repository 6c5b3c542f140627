#!/usr/bin/env bash
# The engine's GPU acceptance runs, one stage per device call (each fits the 10-minute call limit):
#   corpus    prebuild every load_inline candidate in parallel, the harness kernels' tests, then the whole GPU corpus
#             (test_corpus -k cuda-)
#   fidelity  benchmarks/timing_fidelity.py (5 evaluations per case + triton do_bench)
#   latency   benchmarks/turn_latency.py --device cuda --naive
# Usage on the GPU box: OUT=/some/dir [GPUS=2] bash benchmarks/gpu_acceptance.sh corpus fidelity
# On one GPU the corpus is longer than one call: SHARDS=2 SHARD=0, then SHARD=1 in a second call, runs half each.
set -u
PY=${PY:-python3} SITE=${SITE:-/tmp/kstudio-site}
say() { echo "[gpu_acceptance $(date +%T)] $*"; }
# The corpus runs under pytest with the studio's conftest (Django, pytest-django): carry .whl (docs/benchmarks.md §16).
. benchmarks/gpu/box_site.sh
install_box_site || exit 1
export PYTHONPATH=$PWD:$PYTHONPATH KSTUDIO_CACHE_DIR=${KSTUDIO_CACHE_DIR:-/root/kscache}
OUT=${OUT:-/tmp/gpu_acceptance}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])" | tee -a "$OUT/gpu.txt"
for stage in "$@"; do
  started=$(date +%s)
  case "$stage" in
    corpus)
      grep -l load_inline tests/corpus/candidates/*.py | xargs -P 14 -n 1 python3 -m agent build --device cuda > "$OUT/prebuild.log" 2>&1
      echo "prebuild: $(( $(date +%s) - started )) s"
      # The harness's own GPU kernels first (keyed_cuda.py): every corpus verdict below mixes and projects with them.
      python3 -m pytest tests/agent/engine/evaluate/test_keyed_cuda.py -q -p no:cacheprovider --timeout 300 2>&1 \
        | tee "$OUT/keyed_cuda.log" | tail -3
      # GPUS=n (a host with n GPUs): the cases are dealt round-robin to n pytest processes, one per GPU, so the corpus
      # fits one device call; each case still has its GPU to itself.
      if [ "${GPUS:-1}" -gt 1 ]; then
        python3 -m pytest tests/agent/engine/evaluate/test_corpus.py -k cuda- --collect-only -q -p no:cacheprovider \
          | grep '::' > "$OUT/corpus_ids.txt"
        for g in $(seq 0 $(( GPUS - 1 ))); do
          awk -v n="$GPUS" -v g="$g" '(NR - 1) % n == g' "$OUT/corpus_ids.txt" > "$OUT/corpus_ids_$g.txt"
          CUDA_VISIBLE_DEVICES=$g python3 -m pytest $(cat "$OUT/corpus_ids_$g.txt") -v -s -p no:cacheprovider \
            --timeout 180 --durations=0 > "$OUT/corpus_$g.log" 2>&1 &
        done
        wait
        cat "$OUT"/corpus_[0-9]*.log > "$OUT/corpus.log"
      else
        python3 -m pytest tests/agent/engine/evaluate/test_corpus.py -k cuda- --collect-only -q -p no:cacheprovider \
          | grep '::' | awk -v n="${SHARDS:-1}" -v s="${SHARD:-0}" '(NR - 1) % n == s' > "$OUT/corpus_ids.txt"
        echo "cases: $(wc -l < "$OUT/corpus_ids.txt") (shard ${SHARD:-0} of ${SHARDS:-1})"
        python3 -m pytest $(cat "$OUT/corpus_ids.txt") -v -s -p no:cacheprovider --timeout 180 \
          --durations=0 > "$OUT/corpus.log" 2>&1
      fi
      grep -E "^VERDICT|PASSED|FAILED|ERROR|passed|failed" "$OUT/corpus.log" | grep -v "^tests.*PASSED$" | tail -60
      grep -E "^=+ .*(passed|failed|error)" "$OUT/corpus.log"   # one summary line per shard
      ;;
    fidelity)
      python3 benchmarks/timing_fidelity.py --repeats 5 --json "$OUT/fidelity.json" 2>&1 | tee "$OUT/fidelity.log" | tail -12
      ;;
    latency)
      python3 benchmarks/turn_latency.py --device cuda --naive --repeats 5 --json "$OUT/latency.json" 2>&1 \
        | tee "$OUT/latency.log" | tail -12
      ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
  echo "stage $stage: $(( $(date +%s) - started )) s"
done
