"""The built-in policy on our examples, against the policy of an earlier tree, both timed by this tree's engine (issue
23: "on the 16 examples of our own no example gets slower than today").

"Then" is a tree given by path, e.g. the main issue 23 was filed against (`mkdir .old8 && git archive 8cb4dcb agent |
tar -x -C .old8`). Its policy tried every variant it had and submitted the fastest, so what it gave on an example is
the best of its variants. Each of them is written by that tree's own code (a process with the tree first on its path,
tracing our example on meta tensors as its policy did) and evaluated by this tree's engine, one evaluation each.
"Now" is this tree's policy as a user runs it (`python -m agent optimize --policy builtin`): its submitted candidate's
verdict. Each speedup is paired inside its own evaluation (candidate and eager timed in alternating batches), so the
two policies are compared under one protocol; the old engine's own figures would differ by its protocol, not its
kernels.

Resumable like the KernelBench run: one JSON line per example in --state, a rerun skips those it holds, and no example
starts past --seconds. Prebuilds both sides' variants first (--prebuild JOBS at once) so that the turns are timed, not
nvcc.

Usage (on the GPU box): python benchmarks/builtin_examples_then_now.py --old-tree .old8 --state var/then_now.jsonl \
           --prebuild 15 --seconds 480 [--only a,b] [--out then_now.md]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.builtin_policy import _examples, accepted, build_files, machine, read_state, run_command, submitted_variant  # noqa: E402

# Run in a process whose path starts with the old tree: its trace, lowering and templates, as of 8cb4dcb (the
# single-kernel policy). torch.cuda.is_available is forced so that an example sized by it is planned at its GPU size
# even where the emitting machine has no GPU (meta tensors only: nothing runs). Our own examples, so no sandbox.
_EMIT_OLD = r"""
import io, json, sys
from pathlib import Path
import torch
torch.cuda.is_available = lambda: True
from agent.builtin.trace import trace
from agent.builtin.lower import lower
from agent.builtin.codegen import variants, candidate_source
out = Path(sys.argv[1])
for name in sys.argv[2:]:
    path = Path(name)
    buf = io.BytesIO()
    trace({"problem_source": path.read_text()}, buf, {})
    plan = lower(json.loads(buf.getvalue()))
    labels = []
    for i, v in enumerate(variants(plan, "cuda")):
        (out / f"{path.stem}.{i}.py").write_text(candidate_source(plan, v, "cuda"))
        labels.append(v.label)
    (out / f"{path.stem}.json").write_text(json.dumps(labels))
"""


def emit_old(old_tree: Path, paths: list[Path], folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """The old policy's variants of each example: {example: [(label, source file)]}."""
    env = {**os.environ, "PYTHONPATH": str(old_tree.resolve())}
    done = subprocess.run([sys.executable, "-c", _EMIT_OLD, str(folder), *(str(p.resolve()) for p in paths)], cwd=old_tree, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: the old tree at {old_tree} could not write its variants:\n{done.stderr[-2000:]}")
    return {p.stem: [(label, folder / f"{p.stem}.{i}.py")
                     for i, label in enumerate(json.loads((folder / f"{p.stem}.json").read_text()))] for p in paths}


def evaluate_old(evaluator: Any, problem: str, sources: list[tuple[str, Path]]) -> list[dict[str, Any]]:
    rows = []
    for label, file in sources:
        v = evaluator.evaluate(problem, file.read_text())
        t = v.timing
        rows.append({"label": label, "status": v.status.value, "flags": v.flag_names(),
                     "candidate_ms": t.candidate_ms if t else None, "speedup_vs_eager": t.speedup_vs_eager if t else None,
                     "interval": list(t.interval_vs_eager) if t and t.interval_vs_eager else None})
    return rows


def now_line(path: Path, result: dict[str, Any], old: list[dict[str, Any]]) -> dict[str, Any]:
    timing = (result.get("verdict") or {}).get("timing") or {}
    best_old = max((r for r in old if r["status"] == "accepted" and r["speedup_vs_eager"]),
                   key=lambda r: r["speedup_vs_eager"], default=None)
    now = timing.get("speedup_vs_eager") if accepted(result) else None
    then = best_old["speedup_vs_eager"] if best_old else None
    return {"example": path.stem, "now_accepted": accepted(result), "now_speedup_vs_eager": now,
            "now_interval": timing.get("interval_vs_eager"), "now_variant": submitted_variant(result),
            "now_turns": result.get("turns"), "now_stop": str(result.get("stop_reason") or "")[:300],
            "then_speedup_vs_eager": then, "then_interval": best_old["interval"] if best_old else None,
            "then_variant": best_old["label"] if best_old else None, "then_variants": old,
            "now_vs_then": now / then if now and then else None}


def markdown(lines: list[dict[str, Any]], host: str) -> str:
    def x(v: float | None) -> str:
        return f"{v:.2f}x" if v else "-"

    def iv(v: list[float] | None) -> str:
        return f"{v[0]:.2f}-{v[1]:.2f}" if v else "-"

    out = ["| example | now vs eager (interval) | now's variant | then vs eager (interval) | then's best variant | "
           "now / then | old variants accepted |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for ln in lines:
        old_ok = sum(1 for r in ln["then_variants"] if r["status"] == "accepted")
        ratio = f"{ln['now_vs_then']:.3f}" if ln["now_vs_then"] else "-"
        out.append(f"| {ln['example']} | {x(ln['now_speedup_vs_eager'])} ({iv(ln['now_interval'])}) | "
                   f"{ln['now_variant'] or ln['now_stop'][:80]} | {x(ln['then_speedup_vs_eager'])} "
                   f"({iv(ln['then_interval'])}) | {ln['then_variant'] or '-'} | {ratio} | "
                   f"{old_ok} of {len(ln['then_variants'])} |")
    ratios = [ln["now_vs_then"] for ln in lines if ln["now_vs_then"]]
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        out.append(f"\n{len(lines)} examples; now / then geometric mean {geo:.3f}, lowest {min(ratios):.3f}; "
                   f"slower beyond both intervals: {sum(1 for ln in lines if _slower(ln))}; machine: {host}")
    return "\n".join(out) + "\n"


def _slower(line: dict[str, Any]) -> bool:
    """Now is slower than then where now's interval lies wholly under then's (each speedup carries its own)."""
    now, then = line["now_interval"], line["then_interval"]
    return bool(now and then and now[1] < then[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old-tree", type=Path, required=True, help="the earlier tree (its agent/ package at least)")
    parser.add_argument("--device", choices=("cuda",), default="cuda", help="the examples' GPU sizes")
    parser.add_argument("--only", default=None, help="comma-separated example names (default: every examples/*.py)")
    parser.add_argument("--state", type=Path, default=Path("var/then_now.jsonl"), help="one JSON line per example done")
    parser.add_argument("--seconds", type=float, default=None, help="start no example past this many seconds")
    parser.add_argument("--prebuild", type=int, default=0, metavar="JOBS", help="compile both sides' variants first")
    parser.add_argument("--max-turns", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per optimize run")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown table here too")
    args = parser.parse_args(argv)
    if not (args.old_tree / "agent" / "builtin" / "codegen.py").is_file():
        raise SystemExit(f"error: {args.old_tree} holds no agent/builtin/codegen.py: pass a tree of the single-kernel "
                         "policy (e.g. `git archive 8cb4dcb agent | tar -x -C .old8`)")
    started = time.monotonic()
    done = {line["example"] for line in read_state(args.state)}
    pending = [p for p in _examples(args.only) if p.stem not in done]
    print(f"{len(done)} examples done, {len(pending)} to go", file=sys.stderr, flush=True)
    folder = Path(tempfile.mkdtemp(prefix="kstudio-then-"))
    old = emit_old(args.old_tree, pending, folder) if pending else {}
    if args.prebuild and pending:
        from benchmarks.builtin_policy import prebuild
        build_files([f for sources in old.values() for _, f in sources], args.device, args.prebuild)
        prebuild(pending, args.device, args.prebuild)
        print(f"prebuilt both sides in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    from agent.engine.evaluate import EvalConfig, Evaluator

    longest = 0.0
    args.state.parent.mkdir(parents=True, exist_ok=True)
    with Evaluator(EvalConfig(device=args.device, compile_baseline=False)) as evaluator:
        for path in pending:
            if args.seconds is not None and time.monotonic() - started + longest > args.seconds:
                print(f"stopping: {path.stem} could run past --seconds", file=sys.stderr, flush=True)
                break
            began = time.monotonic()
            result = run_command(path.stem, [sys.executable, "-m", "agent", "optimize", str(path), "--policy", "builtin",
                                             "--device", args.device, "--json", "--max-turns", str(args.max_turns),
                                             "--no-compile-baseline"], args.timeout)
            line = now_line(path, result, evaluate_old(evaluator, path.read_text(), old[path.stem]))
            with args.state.open("a") as f:
                f.write(json.dumps(line) + "\n")
            longest = max(longest, time.monotonic() - began)
            print(f"{path.stem}: now {line['now_speedup_vs_eager']}, then {line['then_speedup_vs_eager']} "
                  f"({time.monotonic() - began:.0f} s)", file=sys.stderr, flush=True)
    table = markdown(read_state(args.state), machine(args.device))
    print(table)
    if args.out:
        args.out.write_text(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
