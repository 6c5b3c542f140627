"""Is the harness's own share of a batch a property of the process? (issue 19, docs/benchmarks.md §15)

On the CPU the same code evaluated as its own candidate measured 0.80-0.95x, with the bias fixed for an evaluator
and different between evaluators. A timed call's figure is the candidate's batch less the null batch (the keyed mix
and the projection only), and the null batch is timed in the reference's job, not the candidate's. If the null batch
itself runs at a speed that differs between processes, the subtraction carries that difference into the figure.

Starts `--processes` fresh processes one after the other, each set up as an evaluation's jobs are (setup_device: one
thread, the steady allocator; keyed pools and two base sets of softmax_rows' input), and times `--batches` batches of
`--calls` calls there, alternating: the null batch and softmax. Prints per process the medians (ms per call) and the
softmax's figure less the null; then how far apart the processes are.

`--pairs N [--prime]`: instead, N times, two such processes side by side, alternating batches as an evaluation's two jobs do
(each batch's order flipped every round), so that a slow spell of the box hits both alike; what stays apart between
the two is the process's own. `--prime`: each timed batch preceded by one untimed call of the same kind in the
same job (its caches warm, whichever job ran before it).

Usage: python benchmarks/probes/null_probe.py [--processes 6 | --pairs 4] [--batches 15] [--calls 20] [--rows 512 --cols 1024]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _set_up(args: argparse.Namespace) -> tuple[dict, list, object]:
    sys.path.insert(0, str(ROOT))
    import torch

    from agent.engine.evaluate.jobs import setup_device
    from agent.engine.evaluate.keyed import Pools

    setup_device("cpu", {}, 1)
    torch.manual_seed(0)  # the same bases in every process: only the process differs
    bases = [[torch.randn(args.rows, args.cols)] for _ in range(2)]
    pools = Pools(12345)
    stand_ins = [torch.softmax(bases[0][0], dim=-1)]
    fns = {"null": lambda *a: stand_ins, "softmax": lambda x: torch.softmax(x, dim=-1)}
    return fns, bases, pools


def server(args: argparse.Namespace) -> None:
    """One job of a pair: a line "NAME FIRST_KEY" in, the batch's ms per call out."""
    from agent.engine.evaluate.batch import run_batch

    fns, bases, pools = _set_up(args)
    print("ready", flush=True)
    for line in sys.stdin:
        name, first, *calls = line.split()
        keys = list(range(int(first), int(first) + (int(calls[0]) if calls else args.calls)))
        began = time.perf_counter()
        run_batch(fns[name], bases, keys, "cpu", pools)
        print((time.perf_counter() - began) * 1000 / len(keys), flush=True)


def pairs(args: argparse.Namespace) -> None:
    ratios = []
    for pair in range(args.pairs):
        jobs = [subprocess.Popen([sys.executable, __file__, "--server", "--calls", str(args.calls), "--rows",
                                  str(args.rows), "--cols", str(args.cols)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(2)]
        for job in jobs:
            assert job.stdout.readline().strip() == "ready"
        times = [{"null": [], "softmax": []} for _ in jobs]
        key = 1
        for batch in range(args.batches + 2):
            order = [(j, name) for j in range(2) for name in ("softmax", "null")]
            for j, name in (order if batch % 2 == 0 else order[::-1]):
                if args.prime:  # an untimed call of the same kind first, in the same job, on a key never timed
                    jobs[j].stdin.write(f"{name} {10**9 + key} 1\n")
                    jobs[j].stdin.flush()
                    jobs[j].stdout.readline()
                jobs[j].stdin.write(f"{name} {key}\n")
                jobs[j].stdin.flush()
                key += args.calls
                ms = float(jobs[j].stdout.readline())
                if batch >= 2:
                    times[j][name].append(ms)
        for job in jobs:
            job.stdin.close()
            job.wait()
        med = [{n: statistics.median(v) for n, v in t.items()} for t in times]
        own = [m["softmax"] - m["null"] for m in med]
        crossed = med[1]["softmax"] - med[0]["null"]  # as an evaluation: job 1 the candidate, job 0 the reference
        ratios.append((own[0] / crossed, own[0] / own[1]))
        print(f"pair {pair}: null {med[0]['null']:.3f} / {med[1]['null']:.3f} ms, softmax batch "
              f"{med[0]['softmax']:.3f} / {med[1]['softmax']:.3f}; same code as an evaluation measures it "
              f"(job 1 less job 0's null) {own[0] / crossed:.3f}x, each less its own null {own[0] / own[1]:.3f}x",
              flush=True)
    for i, label in enumerate(("null from the other job (today)", "each job's own null")):
        values = [r[i] for r in ratios]
        print(f"{label}: {min(values):.3f}-{max(values):.3f}x over {len(values)} pairs")


def child(args: argparse.Namespace) -> None:
    from agent.engine.evaluate.batch import run_batch

    fns, bases, pools = _set_up(args)
    times: dict[str, list[float]] = {name: [] for name in fns}
    key = 1
    for batch in range(args.batches + 2):
        for name, fn in fns.items():
            keys = list(range(key, key + args.calls))
            key += args.calls
            began = time.perf_counter()
            run_batch(fn, bases, keys, "cpu", pools)
            if batch >= 2:  # the first two batches warm up
                times[name].append((time.perf_counter() - began) * 1000 / args.calls)
    print(json.dumps({name: statistics.median(t) for name, t in times.items()}
                     | {"cpu": sorted(os.sched_getaffinity(0))}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rows", type=int, default=512)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--pairs", type=int, default=0)
    parser.add_argument("--prime", action="store_true", help="with --pairs: an untimed call before every timed batch")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if args.server:
        server(args)
        return
    if args.pairs:
        pairs(args)
        return
    rows = []
    for i in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--child", "--batches", str(args.batches), "--calls",
                              str(args.calls), "--rows", str(args.rows), "--cols", str(args.cols)],
                             capture_output=True, text=True, check=True)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["kernel"] = row["softmax"] - row["null"]
        rows.append(row)
        print(f"process {i}: null {row['null']:.3f} ms/call, softmax batch {row['softmax']:.3f}, "
              f"softmax less null {row['kernel']:.3f}", flush=True)
    for name in ("null", "softmax", "kernel"):
        values = [r[name] for r in rows]
        print(f"{name:8s} median {statistics.median(values):.3f} ms, max/min across processes "
              f"{max(values) / min(values):.2f}x")
    # What an evaluation does: the candidate's batch in one process less the null timed in another.
    crossed = [rows[i]["softmax"] - rows[(i + 1) % len(rows)]["null"] for i in range(len(rows))]
    same = [r["kernel"] for r in rows]
    print("same code, null from the next process: " + ", ".join(f"{c / s:.2f}" for c, s in zip(crossed, same))
          + " (the figure over the process's own)")


if __name__ == "__main__":
    main()
