"""Legitimate corpus candidates under this tree's engine and an earlier tree's, alternated in one run (issue 19:
"legitimate candidates are still accepted with unchanged speedups (±5%)", side by side with 8cb4dcb).

Each round starts one process per engine, in alternating order (old first in odd rounds, new first in even), and each
process evaluates every pair once, so that drift on the machine touches both engines alike. The old tree is given by
path (`mkdir .old8 && git archive 8cb4dcb agent | tar -x -C .old8`); its engine lives at `agent.evaluate`, this one's
at `agent.engine.evaluate`. Both time against eager only (no torch.compile: the acceptance is about the candidate's
speedup over the same baseline). The speedups are each engine's own figures, by its own protocol: the old one timed
inside the candidate's process, this one by the parent's clock over verified batches; the comparison is exactly the
question the issue asks (did the trusted protocol change what an honest kernel scores?).

Usage (on the GPU box): python benchmarks/legit_then_now.py --old-tree .old8 --rounds 3 --device cuda \
           --json out.json legit_cuda_silu_bias:elementwise_silu_bias_gpu ...
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"

# One engine's evaluations, in a process whose path starts with that engine's tree. Prints one JSON line per pair.
_EVALUATE = r"""
import json, sys, time
from pathlib import Path
engine, corpus, device = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
if engine == "old":
    from agent.evaluate import EvalConfig, Evaluator
else:
    from agent.engine.evaluate import EvalConfig, Evaluator
with Evaluator(EvalConfig(device=device, compile_baseline=False)) as ev:
    for pair in sys.argv[4:]:
        cand, prob = pair.split(":")
        started = time.monotonic()
        v = ev.evaluate((corpus / "problems" / f"{prob}.py").read_text(), (corpus / "candidates" / f"{cand}.py").read_text())
        t = v.timing
        print(json.dumps({"engine": engine, "engine_file": sys.modules[Evaluator.__module__].__file__, "candidate": cand, "status": v.status.value, "flags": v.flag_names(),
                          "speedup_vs_eager": t.speedup_vs_eager if t else None,
                          "candidate_ms": t.candidate_ms if t else None, "eager_ms": t.eager_ms if t else None,
                          "seconds": round(time.monotonic() - started, 1)}), flush=True)
"""


def run_engine(tree: Path, device: str, pairs: list[str], timeout: float) -> list[dict[str, Any]]:
    """One process of one engine over every pair; a pair it could not reach is missing from the answer, not invented."""
    engine = "new" if tree.resolve() == ROOT else "old"
    # The tree first on the path, this checkout off it (the rest, e.g. a site folder of dependencies, kept).
    kept = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != ROOT]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree.resolve()), *kept])}
    if engine == "old" and "KSTUDIO_CACHE_DIR" in env:  # the old engine's caches apart: neither reads the other's
        env["KSTUDIO_CACHE_DIR"] = env["KSTUDIO_CACHE_DIR"].rstrip("/") + "-old"
    try:
        done = subprocess.run([sys.executable, "-c", _EVALUATE, engine, str(CORPUS), device, *pairs], cwd=tree, env=env,
                              capture_output=True, text=True, timeout=timeout)
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = f"timed out after {timeout:.0f} s"
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(rows) < len(pairs):
        print(f"note: the engine at {tree} answered {len(rows)} of {len(pairs)} pairs: {err[-800:]}", file=sys.stderr)
    return rows


def table(rows: list[dict[str, Any]], pairs: list[str]) -> list[str]:
    lines = ["| candidate | old engine (x vs eager, per round) | this engine | old median | this median | this/old |",
             "| --- | --- | --- | --- | --- | --- |"]
    for pair in pairs:
        cand = pair.split(":")[0]
        per = {e: [r for r in rows if r["candidate"] == cand and r["engine"] == e] for e in ("old", "new")}
        figures = {e: [r["speedup_vs_eager"] for r in rs if r["status"] == "accepted" and r["speedup_vs_eager"]]
                   for e, rs in per.items()}
        shown = {e: ", ".join(f"{r['speedup_vs_eager']:.2f}" if r["status"] == "accepted" and r["speedup_vs_eager"]
                              else r["status"] for r in rs) for e, rs in per.items()}
        med = {e: statistics.median(f) if f else None for e, f in figures.items()}
        ratio = f"{med['new'] / med['old']:.3f}" if med["old"] and med["new"] else "n/a"
        lines.append(f"| {cand} | {shown['old']} | {shown['new']} | "
                     + " | ".join(f"{med[e]:.2f}x" if med[e] else "n/a" for e in ("old", "new")) + f" | {ratio} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-tree", type=Path, required=True, help="the earlier tree (its agent/ package)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--timeout", type=float, default=200.0, help="seconds per engine process")
    parser.add_argument("--json", type=Path, help="write every evaluation here")
    parser.add_argument("pairs", nargs="+", help="candidate:problem (file stems under tests/corpus)")
    args = parser.parse_args(argv)
    if not (args.old_tree / "agent" / "evaluate" / "evaluator.py").is_file():
        raise SystemExit(f"error: {args.old_tree} holds no agent/evaluate/evaluator.py: pass the tree of 8cb4dcb "
                         "(mkdir .old8 && git archive 8cb4dcb agent | tar -x -C .old8)")
    rows: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        order = [args.old_tree, ROOT] if rnd % 2 == 0 else [ROOT, args.old_tree]
        for tree in order:
            got = run_engine(tree, args.device, args.pairs, args.timeout)
            for r in got:
                r["round"] = rnd
                print(json.dumps(r), file=sys.stderr, flush=True)
            rows += got
        if args.json:  # after every round, so that a cut-off run keeps what it measured
            args.json.write_text(json.dumps(rows, indent=1))
    print("\n".join(table(rows, args.pairs)))


if __name__ == "__main__":
    main()
