"""The same legitimate CPU candidate evaluated N times on an idle box, then N times while a second process loads
every core (issue 19): do the speedups stay inside their own reported intervals, and near the idle figure?

Usage: python benchmarks/cpu_repeatability.py [--repeats 5] [--candidate legit_cpp_softmax_rows:softmax_rows]
                                             [--same-code] [--pin CPUS] [--loads idle,loaded]
Prints one row per evaluation and a summary: the loaded speedups' spread, how many fall inside every other
loaded evaluation's interval, and their median against the idle median. --same-code evaluates the problem's own
code as its candidate (the speedup of identical code should be 1.0); --pin 1 runs the evaluator, and so both of its
jobs, on CPU 1 only (the load still spreads over every CPU): a probe of whether placement moves the figure.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.engine.evaluate import EvalConfig, Evaluator  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"


def _spin() -> None:
    while True:
        pass


def _evaluate(ev: Evaluator, problem: str, candidate: str, label: str, repeats: int) -> list[dict]:
    rows = []
    for i in range(repeats):
        started = time.monotonic()
        v = ev.evaluate(problem, candidate)
        t = v.timing
        row = {"load": label, "i": i, "status": v.status.value, "flags": v.flag_names(), "seconds": time.monotonic() - started,
               "speedup": t.speedup_vs_eager if t else None, "interval": t.interval_vs_eager if t else None,
               "rounds": t.rounds if t else None, "candidate_ms": t.candidate_ms if t else None}
        rows.append(row)
        lo, hi = row["interval"] or (float("nan"), float("nan"))
        row["eager_ms"] = t.eager_ms if t else None
        print(f"| {label} | {i + 1} | {row['status']} | {row['speedup']:.3f} | {lo:.3f}-{hi:.3f} | {row['rounds']} | "
              f"{row['candidate_ms']:.3f} | {row['eager_ms']:.3f} | {row['seconds']:.1f} |", flush=True)
    return rows


def _summary(label: str, rows: list[dict], idle_median: float | None) -> float:
    speeds = [r["speedup"] for r in rows]
    median = statistics.median(speeds)
    inside = sum(all(r2["interval"][0] <= r["speedup"] <= r2["interval"][1] for r2 in rows) for r in rows)
    # Where every interval overlaps every other: the figures agree with each other within what each reported.
    low, high = max(r["interval"][0] for r in rows), min(r["interval"][1] for r in rows)
    common = f"all {len(rows)} intervals share {low:.3f}-{high:.3f}" if low <= high else \
        f"no point common to all {len(rows)} intervals (highest low {low:.3f} > lowest high {high:.3f})"
    versus = f" ({100 * (median / idle_median - 1):+.1f}% against idle)" if idle_median else ""
    # The idle rows against their own median (they used to count as all within, whatever their spread).
    anchor = idle_median or median
    print(f"{label}: median {median:.3f}{versus}, spread {min(speeds):.3f}-{max(speeds):.3f}; {common}; "
          f"{inside} of {len(rows)} inside every {label} interval; "
          f"{sum(abs(s / anchor - 1) <= 0.25 for s in speeds)} of {len(rows)} within 25% of the idle median")
    return median


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--candidate", default="legit_cpp_softmax_rows:softmax_rows")
    parser.add_argument("--same-code", action="store_true", help="the problem's own code as its candidate")
    parser.add_argument("--pin", default="", help="CPUs (e.g. 1 or 0,1) the evaluator and its jobs run on")
    parser.add_argument("--loads", default="idle,loaded")
    parser.add_argument("--batch-ms", type=float, default=None, help="EvalConfig.batch_ms (None: the engine's own)")
    args = parser.parse_args()
    cand, prob = args.candidate.split(":")
    problem = (CORPUS / "problems" / f"{prob}.py").read_text()
    candidate = problem.replace("class Model(", "class ModelNew(") if args.same_code else \
        (CORPUS / "candidates" / f"{cand}.py").read_text()
    every_cpu = os.sched_getaffinity(0)
    if args.pin:
        # Before the evaluator starts: its sandboxes' processes, and so both jobs, inherit it.
        os.sched_setaffinity(0, {int(c) for c in args.pin.split(",")})
    print(f"{'the problem itself' if args.same_code else cand} on {prob}, {os.cpu_count()} cores"
          f"{', pinned to CPUs ' + args.pin if args.pin else ''}")
    print("| load | # | status | speedup vs eager | interval | rounds | candidate ms | eager ms | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    results: dict[str, list[dict]] = {}
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False, allow_any_torch_op=args.same_code,
                                batch_ms=args.batch_ms)) as ev:
        ev.evaluate(problem, candidate)  # the build, and a first evaluation nobody counts
        for load in args.loads.split(","):
            hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in every_cpu] if load == "loaded" else []
            for hog in hogs:
                hog.start()
                os.sched_setaffinity(hog.pid, every_cpu)  # the load on every CPU, whatever the pin
            try:
                results[load] = _evaluate(ev, problem, candidate, load, args.repeats)
            finally:
                for hog in hogs:
                    hog.terminate()
    print()
    idle_median = _summary("idle", results["idle"], None) if "idle" in results else None
    for load, rows in results.items():
        if load != "idle":
            _summary(load, rows, idle_median)


if __name__ == "__main__":
    main()
