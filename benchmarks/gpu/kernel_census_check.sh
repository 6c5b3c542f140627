#!/usr/bin/env bash
# The kernel census on the GPU box: a few evaluations with their census summaries, then the corpus's GPU cases that
# matter to it. Usage (after box_site.sh's install_box_site): OUT=dir bash benchmarks/gpu/kernel_census_check.sh [pytest -k]
set -u
OUT=${OUT:-/tmp/kcensus}
mkdir -p "$OUT"
C=tests/corpus/candidates
P=tests/corpus/problems
show() {
    python3 - "$1" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as exc:  # noqa: BLE001
    print("  no verdict:", exc); sys.exit(0)
t = d.get("timing") or {}
print("  status", d.get("status"), "flags", [f["flag"] for f in d.get("flags", [])],
      "vs eager", t.get("speedup_vs_eager"))
for f in d.get("flags", []):
    print("   ", f["flag"], f["detail"][:400])
print("  census", json.dumps(d.get("kernel_census"))[:2500])
PY
}
for pair in "elementwise_silu_bias_gpu:legit_cuda_silu_bias" "elementwise_silu_bias_gpu:exploit_py_observer_switch_fallback" \
            "linear_relu_gpu:legit_cuda_linear_relu" "softmax_rows_gpu:legit_triton_softmax_rows"; do
    p=${pair%%:*}; c=${pair##*:}
    echo "== $p $c"
    timeout 200 python3 -m agent evaluate "$P/$p.py" "$C/$c.py" --device cuda --json > "$OUT/$c.json" 2> "$OUT/$c.err"
    show "$OUT/$c.json"; tail -3 "$OUT/$c.err"
done
if [ -n "${1:-}" ]; then
    grep -l load_inline $C/legit_cuda*.py | xargs -P 8 -n 1 python3 -m agent build --device cuda > /dev/null 2>&1
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/agent/engine/evaluate/test_corpus.py -k "$1" --timeout 90 2>&1 | tail -25
fi
