#!/usr/bin/env bash
# Issue 21's acceptance on the H100: eight KernelBench level-1 problems at their own sizes (five of them 6-8 GiB a
# tensor), each (1) with a plain hand-written CUDA candidate of ours (benchmarks/kernelbench_native/) and (2) with
# the built-in policy. Every hand-written one must end accepted; every built-in run accepted or with its own honest
# limit (a capacity verdict, or the policy saying what it cannot plan), never an out-of-memory charged to a kernel.
#
#   KB=/tmp/KernelBench/KernelBench/level1 bash benchmarks/gpu/kernelbench_native.sh
# (KernelBench checked out with the fetch tool into /tmp, never into the repository.) Verdicts land in $OUT.
set -u
KB=${KB:-/tmp/KernelBench/KernelBench/level1}
OUT=${OUT:-var/kernelbench_native}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
for p in 19_ReLU 23_Softmax 24_LogSoftmax 26_GELU_ 38_L1Norm_ 95_CrossEntropyLoss 88_MinGPTNewGelu \
         12_Matmul_with_diagonal_matrices_; do
  start=$(date +%s)
  $PY -m agent evaluate "$KB/$p.py" "benchmarks/kernelbench_native/$p.py" --device cuda --backend cuda --json \
      > "$OUT/$p.hand.json" 2> "$OUT/$p.hand.log"
  mid=$(date +%s)
  $PY -m agent optimize "$KB/$p.py" --policy builtin --device cuda --json --max-turns 8 \
      > "$OUT/$p.builtin.json" 2> "$OUT/$p.builtin.log"
  echo "$p: hand-written $((mid - start)) s, built-in $(( $(date +%s) - mid )) s"
done
$PY - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for hand in sorted(out.glob("*.hand.json")):
    name = hand.name[:-len(".hand.json")]
    try:
        v = json.loads(hand.read_text())
    except ValueError:
        v = {"status": "no verdict", "message": (out / f"{name}.hand.log").read_text()[-300:]}
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
