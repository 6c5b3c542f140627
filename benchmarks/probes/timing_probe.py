"""Where does the engine's timing differ from triton's do_bench? (issue 2, timing fidelity)

One process times one corpus candidate on its H100-sized problem under several protocols that differ
in one knob each from the engine's (agent/engine/evaluate/timing.py): a device-wide sync before every call
or calls queued back to back, rotated input buffers or one, new values per call or the same, the L2
flush. Run it in several fresh processes to see the per-process spread too.

Usage (GPU box): python3 benchmarks/probes/timing_probe.py [CANDIDATE PROBLEM] [--iterations 100]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from agent.engine.evaluate.timing import Flusher, timed_values  # noqa: E402


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def protocol(fn, value_sets, *, iterations: int, sync_each: bool, rotate: int, new_values: bool, flush: bool,
             busy_us: float = 0.0) -> float:
    buffers = [[v.clone() for v in value_sets[0]] for _ in range(rotate)]
    flusher = Flusher("cuda")
    for i in range(10):
        fn(*buffers[i % rotate])
    torch.cuda.synchronize()
    events = []
    for i in range(iterations):
        args = buffers[i % rotate]
        if new_values:
            for dst, src in zip(args, timed_values(value_sets, i)):
                dst.copy_(src)
        if flush:
            flusher()
        if sync_each:
            torch.cuda.synchronize()
        if busy_us:
            torch.cuda._sleep(int(busy_us * 1980))  # keep the stream busy across the host's launch
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn(*args)
        end.record()
        events.append((begin, end))
        if sync_each:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return statistics.median(b.elapsed_time(e) for b, e in events)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("candidate", nargs="?", default="tests/corpus/candidates/legit_cuda_silu_bias.py")
    parser.add_argument("problem", nargs="?", default="tests/corpus/problems/elementwise_silu_bias_gpu.py")
    parser.add_argument("--iterations", type=int, default=100)
    args = parser.parse_args()
    import triton.testing

    problem, cand = _load(ROOT / args.problem, "probe_problem"), _load(ROOT / args.candidate, "probe_candidate")
    torch.manual_seed(0)
    model = cand.ModelNew(*problem.get_init_inputs()).cuda().eval()
    value_sets = []
    for s in range(3):
        torch.manual_seed(100 + s)
        value_sets.append([x.cuda() for x in problem.get_inputs()])
    fn = torch.no_grad()(model)
    rows = {}
    t0 = time.perf_counter()
    rows["do_bench"] = triton.testing.do_bench(lambda: fn(*value_sets[0]), warmup=100, rep=500, return_mode="median")
    knobs = {
        "engine (sync, rotate 3, new values, flush)": dict(sync_each=True, rotate=3, new_values=True, flush=True),
        "engine + 100us busy stream": dict(sync_each=True, rotate=3, new_values=True, flush=True, busy_us=100),
        "no sync (queued), rotate 3, new values, flush": dict(sync_each=False, rotate=3, new_values=True, flush=True),
        "sync, rotate 1, same values, flush": dict(sync_each=True, rotate=1, new_values=False, flush=True),
        "no sync, rotate 1, same values, flush (= do_bench)": dict(sync_each=False, rotate=1, new_values=False, flush=True),
        "sync, rotate 3, new values, no flush": dict(sync_each=True, rotate=3, new_values=True, flush=False),
    }
    for name, kw in knobs.items():
        rows[name] = protocol(fn, value_sets, iterations=args.iterations, **kw)
    rows["do_bench again"] = triton.testing.do_bench(lambda: fn(*value_sets[0]), warmup=100, rep=500, return_mode="median")
    print(json.dumps({"candidate": Path(args.candidate).name, "seconds": round(time.perf_counter() - t0, 1),
                      "median_ms": {k: round(v, 4) for k, v in rows.items()}}), flush=True)


if __name__ == "__main__":
    main()
