#!/bin/bash
# The built-in policy over a KernelBench checkout at its own sizes, one device call's worth (issue 23), resumable: the
# state (benchmarks/results/builtin_kernelbench.jsonl, carried as var/builtin_state.jsonl) is copied into $OUT first, so
# that every problem finished before the call's limit comes back; merge it into the repository's after with
# `python benchmarks/merge_state.py FILES_AT` (the lines this call measured, and no other).
# Usage on the GPU box (carry .kb, the checkout's levels, and var/builtin_state.jsonl):
#   KS_ENGINE=<commit> bash benchmarks/gpu/builtin_session.sh SECONDS [PROBLEM_TO_MEASURE_AGAIN ...]
# KS_ENGINE: the commit of the tree sent (it travels without .git), written into every state line measured.
# STALE=1: the lines that name no engine (measured by engines before session 29) are measured again, in KernelBench's
# order, as far as the call goes; merge_state.py replaces only those measured.
# SECONDS: the call's limit less the prebuild (about 60 s) and a margin; no problem starts that the longest one so far
# would carry past it (a 590 s call: 500).
# On a box of several GPUs every GPU measures a problem of its own at once (GPUS: how many, default all of them);
# PREBUILD_WINDOW (default 8 per GPU) problems' variants are compiled first, PREBUILD_JOBS (default 7/8 of the cores)
# at once.
set -u
budget=${1:?usage: builtin_session.sh SECONDS [PROBLEM ...]}
shift
cp var/builtin_state.jsonl "$OUT/state.jsonl"
for again in "$@"; do  # measured again: its line goes
  grep -v "\"problem\": \"$again\"" "$OUT/state.jsonl" > "$OUT/state.tmp"; mv "$OUT/state.tmp" "$OUT/state.jsonl"
done
if [ "${STALE:-0}" = 1 ]; then  # every line no engine commit names (measured before session 29) is measured again
  grep '"engine"' "$OUT/state.jsonl" > "$OUT/state.tmp"; mv "$OUT/state.tmp" "$OUT/state.jsonl"
fi
echo "state: $(wc -l < "$OUT/state.jsonl") problems"
# Every line after this one is this call's own measurement, whatever cuts the call short: benchmarks/merge_state.py
# takes only those into the repository's state, so a call that started from an older copy reverts nothing.
wc -l < "$OUT/state.jsonl" > "$OUT/state.base"
gpus=${GPUS:-$(nvidia-smi -L | grep -c '^GPU')}
echo "GPUs: $gpus ($(nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | xargs))"
PYTHONPATH=$PWD python3 benchmarks/builtin_policy.py .kb --run --levels 1,2 --device cuda --max-turns 8 --timeout 300 \
  --gpus "$gpus" \
  --prebuild "${PREBUILD_JOBS:-$(( $(nproc) * 7 / 8 ))}" --prebuild-window "${PREBUILD_WINDOW:-$(( 8 * gpus ))}" --prebuild-variants 1 --state "$OUT/state.jsonl" --seconds "$budget" \
  --out "$OUT/builtin_kb.md" 2>&1 | grep --line-buffered -v "SANDBOX WITHOUT"
if [ "${STALE:-0}" = 1 ]; then  # every line no engine commit names (measured before session 29) is measured again
  grep '"engine"' "$OUT/state.jsonl" > "$OUT/state.tmp"; mv "$OUT/state.tmp" "$OUT/state.jsonl"
fi
echo "state: $(wc -l < "$OUT/state.jsonl") problems"
