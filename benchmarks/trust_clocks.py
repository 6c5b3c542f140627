"""The parent's clock against the candidate's own device events, over the examples (issue 19).

Each example's own PyTorch code is evaluated as the candidate (ModelNew = Model): the verdict's figure is the
parent's clock over keyed batches less the null batches (docs/threat-model.md); the candidate's job also
reports CUDA events around each batch, less the null batches' share. On calls long enough to keep the GPU
busy the two should agree within 2%. Also prints the speedup vs eager (about 1.0x: the same code) and its
interval, and how long each evaluation took.

Usage: python benchmarks/trust_clocks.py [--device cuda] [--only a,b] [--json out.json] [--batch-ms 50] [--trace t.jsonl]
       [--pair problem.py:candidate.py ...] (a candidate of its own against its problem, e.g. a corpus pair: where one
       kernel's figure moved between engines, --parts says which part of the batch moved)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.engine.evaluate import EvalConfig, Evaluator  # noqa: E402


def as_candidate(problem_source: str) -> str:
    return problem_source + "\n\nclass ModelNew(Model):\n    pass\n"


def _traced(path: Path) -> dict[str, str]:
    """Record every batch the parent times, wrapping the session's two batch methods (this process is the parent: our
    own code). Where the two clocks part, this shows which batch's wall time and device time differ."""
    from agent.engine.evaluate.session import Session

    state = {"example": ""}
    out = path.open("w")
    reference_batch, candidate_batch = Session._reference_batch, Session._run_candidate_batch

    last_end = [time.monotonic()]

    def write(kind: str, n: int, seconds: float, events: float | None, parts: Any = None, began: float = 0.0) -> None:
        # wall: the whole method on the parent's clock (the batch's own seconds plus what surrounds it: the probe,
        # stopping and waking jobs); gap: the parent's time since the previous batch's method returned (checks, rounds)
        ended = time.monotonic()
        out.write(json.dumps({"example": state["example"], "batch": kind, "calls": n, "seconds": seconds,
                              "wall": ended - began, "gap": began - last_end[0], "events_ms": events, "parts_ms": parts}) + "\n")
        out.flush()
        last_end[0] = time.monotonic()

    def ref(self, model, keys, events=False, **kwargs):
        replies: list[Any] = []
        receive = self.ref.receive

        def kept(*args: Any, **kwargs: Any) -> Any:  # the batch's own reply, for its parts (--parts)
            got = receive(*args, **kwargs)
            replies.append(got[0])
            return got

        self.ref.receive = kept
        began = time.monotonic()
        try:
            got = reference_batch(self, model, keys, events, **kwargs)
        finally:
            self.ref.receive = receive
        parts = replies[-1].get("parts_ms") if replies and isinstance(replies[-1], dict) else None
        write(model, len(keys), got[0], got[2], parts, began)
        return got

    def cand(self, keys, null=False, **kwargs):
        began = time.monotonic()
        seconds, reply = candidate_batch(self, keys, null=null, **kwargs)
        reply = reply if isinstance(reply, dict) else {}
        write("candidate_null" if null else "candidate", len(keys), seconds, reply.get("events_ms"), reply.get("parts_ms"),
              began)
        return seconds, reply

    Session._reference_batch, Session._run_candidate_batch = ref, cand
    return state


def _print_parts(trace: Path) -> None:
    """Medians of each batch kind's device ms per call, by part (--parts), with the scale each example's own null gave."""
    groups: dict[tuple[str, str], list[dict[str, float]]] = {}
    for line in trace.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("parts_ms") and rec["calls"] > 1:  # the one-call batches are warm-ups and probes
            groups.setdefault((rec["example"], rec["batch"]), []).append(
                rec["parts_ms"])  # already per call
    if not groups:
        return
    print("\n| example | batch | batches | inputs (mix) | call | projection |")
    print("|---|---|---|---|---|---|")
    for (example, batch), parts in sorted(groups.items()):
        med = {k: statistics.median(p.get(k, 0.0) for p in parts) for k in ("inputs", "call", "projection")}
        print(f"| {example} | {batch} | {len(parts)} | {med['inputs']:.4f} | {med['call']:.4f} | {med['projection']:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", default="")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--batch-ms", type=float, default=None, help="timed batches' length (EvalConfig.batch_ms)")
    parser.add_argument("--trace", type=Path, default=None,
                        help="write every timed batch (which, calls, parent seconds, device events ms) as JSON lines")
    parser.add_argument("--parts", action="store_true",
                        help="with --trace: each batch's device time per call of its inputs, call, projections and the gaps "
                             "between calls (KSTUDIO_BATCH_PARTS=1 in both jobs: events of their own in every batch)")
    parser.add_argument("--problem", type=Path, action="append", default=[],
                        help="also a problem file of elsewhere (a KernelBench problem at its own size), as its own candidate")
    parser.add_argument("--pair", action="append", default=[],
                        help="problem.py:candidate.py, timed as given (also with --only none: the pairs alone)")
    args = parser.parse_args()
    if args.parts:
        os.environ["KSTUDIO_BATCH_PARTS"] = "1"  # read by the jobs (the sandbox passes the parent's environment on)
    trace = _traced(args.trace) if args.trace else None
    names = [n for n in args.only.split(",") if n]
    paths = sorted(p for p in (ROOT / "examples").glob("*.py") if not names or p.stem in names) + args.problem
    # (name, problem's source, candidate's source): an example or --problem is its own candidate
    items = [(p.stem, p.read_text(), as_candidate(p.read_text())) for p in paths]
    for pair in args.pair:
        problem, _, candidate = pair.partition(":")
        items.append((Path(candidate).stem, Path(problem).read_text(), Path(candidate).read_text()))
    rows = []
    # The candidate is the problem's own PyTorch code, so every op is allowed: under the allow-list its first checked
    # call is `forbidden_torch_op`, and since session 34 a rejecting flag ends the evaluation before any timing (all 16
    # examples came back rejected with no figure on the H200 in session 36).
    config = EvalConfig(device=args.device, compile_baseline=args.compile, backend="cuda" if args.device == "cuda" else "cpp",
                        batch_ms=args.batch_ms, allow_any_torch_op=True)
    with Evaluator(config) as ev:
        for name, source, candidate in items:
            started = time.monotonic()
            if trace is not None:
                trace["example"] = name
            v = ev.evaluate(source, candidate)
            t = v.timing
            row = {"example": name, "status": v.status.value, "flags": v.flag_names(), "seconds": time.monotonic() - started,
                   "phases": {k: round(s, 3) for k, s in (v.seconds or {}).items()}}  # where the evaluation's time went
            if t is not None:
                row.update(parent_ms=t.candidate_ms, events_ms=t.device_events_ms, eager_ms=t.eager_ms,
                           speedup=t.speedup_vs_eager, interval=t.interval_vs_eager, rounds=t.rounds,
                           calls=t.calls_per_batch, verified=t.verified_calls, harness=t.harness, null_scale=t.null_scale,
                           agreement_pct=100 * (t.device_events_ms - t.candidate_ms) / t.candidate_ms
                           if t.device_events_ms and t.candidate_ms else None)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print("| example | parent ms | events ms | events vs parent | speedup vs eager (interval) | rounds | verified calls | s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "parent_ms" not in r:
            print(f"| {r['example']} | {r['status']} | | | | | | {r['seconds']:.1f} |")
            continue
        events = f"{r['events_ms']:.4f}" if r["events_ms"] else "-"
        agree = f"{r['agreement_pct']:+.1f}%" if r["agreement_pct"] is not None else "-"
        lo, hi = r["interval"] or (0, 0)
        print(f"| {r['example']} | {r['parent_ms']:.4f} | {events} | {agree} | {r['speedup']:.3f} ({lo:.3f}-{hi:.3f}) | "
              f"{r['rounds']} | {r['verified']} | {r['seconds']:.1f} |")
    if args.trace:
        _print_parts(args.trace)
    phases = sorted({k for r in rows for k in r["phases"]})
    if phases:  # the evaluation's seconds by phase (the verdict's own record), medians over the examples
        print("\nphase medians over the examples (s): " + ", ".join(
            f"{k} {sorted(r['phases'].get(k, 0.0) for r in rows)[len(rows) // 2]:.2f}" for k in phases))


if __name__ == "__main__":
    main()
