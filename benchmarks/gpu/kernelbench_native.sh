#!/usr/bin/env bash
# Issue 21's acceptance on the H100: eight KernelBench level-1 problems at their own sizes (five of them 6-8 GiB a
# tensor), each (1) with a plain hand-written CUDA candidate of ours (benchmarks/kernelbench_native/) and (2) with
# the built-in policy. Every hand-written one must end accepted; every built-in run accepted or with its own honest
# limit (a capacity verdict, or the policy saying what it cannot plan), never an out-of-memory charged to a kernel.
#
#   KB=/tmp/KernelBench/KernelBench/level1 bash benchmarks/gpu/kernelbench_native.sh
# MODE=hand or MODE=builtin runs one half (each fits one 10-minute device call), ONLY="19_ReLU 23_Softmax" a subset.
# (KernelBench checked out with the fetch tool into /tmp, never into the repository.) Verdicts land in $OUT.
set -u
KB=${KB:-/tmp/KernelBench/KernelBench/level1}
OUT=${OUT:-var/kernelbench_native}
PY=${PY:-.venv/bin/python}
MODE=${MODE:-both}
ONLY=${ONLY:-19_ReLU 23_Softmax 24_LogSoftmax 26_GELU_ 38_L1Norm_ 95_CrossEntropyLoss 88_MinGPTNewGelu 12_Matmul_with_diagonal_matrices_}
LIMIT=${LIMIT:-300}  # seconds per command, so that one stuck problem cannot take the whole call
mkdir -p "$OUT"
for p in $ONLY; do
  start=$(date +%s)
  if [ "$MODE" != builtin ]; then
    timeout "$LIMIT" $PY -m agent evaluate "$KB/$p.py" "benchmarks/kernelbench_native/$p.py" --device cuda --backend cuda \
        --json > "$OUT/$p.hand.json" 2> "$OUT/$p.hand.log"
  fi
  mid=$(date +%s)
  if [ "$MODE" != hand ]; then
    timeout "$LIMIT" $PY -m agent optimize "$KB/$p.py" --policy builtin --device cuda --json --max-turns 8 \
        > "$OUT/$p.builtin.json" 2> "$OUT/$p.builtin.log"
  fi
  echo "$p: hand-written $((mid - start)) s, built-in $(( $(date +%s) - mid )) s"
done
$PY - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
names = sorted({f.name.split(".")[0] for f in out.glob("*.json")})
for name in names:
    hand = out / f"{name}.hand.json"
    try:
        v = json.loads(hand.read_text())
    except (OSError, ValueError):
        log = out / f"{name}.hand.log"
        v = {"status": "no verdict", "message": log.read_text()[-300:] if log.exists() else "not run"}
    t = v.get("timing") or {}
    try:
        b = json.loads((out / f"{name}.builtin.json").read_text())
    except (OSError, ValueError):
        b = {"status": "no output"}
    bv = b.get("verdict") or {}
    print(f"{name}: hand-written {v.get('status')} ({(v.get('memory') or {}).get('mode', '?')}; "
          f"{t.get('speedup_vs_best') or 0:.2f}x vs best, SOL {100 * (t.get('sol_fraction') or 0):.0f}%) | built-in "
          f"{b.get('status')} {bv.get('status', '')}: {(b.get('stop_reason') or '')[:160]}")
    if v.get("status") != "accepted":
        print("   ", (v.get("message") or "")[:600])
PY
