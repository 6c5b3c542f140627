#!/usr/bin/env bash
# Issue 19's side-by-side figure: the cache-hit turn of this tree and of an older one, alternating in one call, then
# where this tree's last turn spent its seconds (the verdict's `seconds`: phases, and per command of each job).
# Usage on the GPU box: OLD=.old8 OUT=dir bash benchmarks/gpu/latency_pair.sh [passes] [backend] [case]
# (the old tree from `git archive <commit> | tar -x -C .old8`, carried).
set -u
passes=${1:-2} backend=${2:-nvrtc} case=${3:-elementwise}
here=$PWD
for pass in $(seq 1 "$passes"); do
  for label in old new; do
    tree=$here; [ "$label" = old ] && tree=$here/$OLD
    (cd "$tree" && KSTUDIO_CACHE_DIR=/tmp/kslat_$label PYTHONPATH=$tree timeout 280 python3 benchmarks/turn_latency.py \
       --device cuda --backends "$backend" --only "$case" --repeats 5 --json "$OUT/latency_${label}_$pass.json" \
       > "$OUT/latency_${label}_$pass.log" 2>&1) || echo "$label pass $pass failed: $(tail -3 "$OUT/latency_${label}_$pass.log")"
  done
done
python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
last = None
for path in sorted(out.glob("latency_*_*.json")):
    for row in json.loads(path.read_text()):
        turns = ", ".join(f"{t:.2f}" for t in row["hit_turn_all_s"])
        print(f"{path.stem}: p50 {row['hit_turn_p50_s']:.2f} s ({turns}), {row['status']}, {row.get('speedup_vs_eager')}")
        if "_new_" in path.stem:
            last = row
for name, spent in sorted((last or {}).get("stage_seconds", {}).items()):
    print(f"  {name:48s} {spent:7.3f}")
PY
