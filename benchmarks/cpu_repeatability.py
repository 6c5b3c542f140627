"""The same legitimate CPU candidate evaluated N times on an idle box, then N times while a second process loads
every core (issue 19): do the speedups stay inside their own reported intervals, and near the idle figure?

Usage: python benchmarks/cpu_repeatability.py [--repeats 5] [--candidate legit_cpp_softmax_rows:softmax_rows]
Prints one row per evaluation and a summary: the loaded speedups' spread, how many fall inside every other
loaded evaluation's interval, and their median against the idle median.
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
        print(f"| {label} | {i + 1} | {row['status']} | {row['speedup']:.3f} | {lo:.3f}-{hi:.3f} | {row['rounds']} | "
              f"{row['candidate_ms']:.3f} | {row['seconds']:.1f} |", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--candidate", default="legit_cpp_softmax_rows:softmax_rows")
    args = parser.parse_args()
    cand, prob = args.candidate.split(":")
    problem = (CORPUS / "problems" / f"{prob}.py").read_text()
    candidate = (CORPUS / "candidates" / f"{cand}.py").read_text()
    print(f"{cand} on {prob}, {os.cpu_count()} cores")
    print("| load | # | status | speedup vs eager | interval | rounds | candidate ms | s |")
    print("|---|---|---|---|---|---|---|---|")
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False)) as ev:
        ev.evaluate(problem, candidate)  # the build, and a first evaluation nobody counts
        idle = _evaluate(ev, problem, candidate, "idle", args.repeats)
        hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(os.cpu_count() or 2)]
        for hog in hogs:
            hog.start()
        try:
            loaded = _evaluate(ev, problem, candidate, "loaded", args.repeats)
        finally:
            for hog in hogs:
                hog.terminate()
    idle_median = statistics.median(r["speedup"] for r in idle)
    speeds = [r["speedup"] for r in loaded]
    inside = sum(all(r2["interval"][0] <= r["speedup"] <= r2["interval"][1] for r2 in loaded) for r in loaded)
    print(f"\nidle median {idle_median:.3f}; loaded median {statistics.median(speeds):.3f} "
          f"({100 * (statistics.median(speeds) / idle_median - 1):+.1f}%), loaded spread {min(speeds):.3f}-{max(speeds):.3f}; "
          f"{inside} of {len(loaded)} loaded speedups inside every loaded interval")


if __name__ == "__main__":
    main()
