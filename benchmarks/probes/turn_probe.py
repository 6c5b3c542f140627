"""Where a cache-hit turn's time goes: each phase of each job, per evaluation (the verdict's `seconds`).

Usage on the GPU box: python3 benchmarks/probes/turn_probe.py --repeats 4 --json $OUT/turns.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent.engine.evaluate import EvalConfig, Evaluator  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
CASES = {
    "cuda-elementwise": ("cuda", "elementwise_silu_bias_gpu.py", "legit_cuda_silu_bias.py"),
    "cuda-rows": ("cuda", "softmax_rows_gpu.py", "legit_cuda_softmax_rows.py"),
    "cuda-matmul": ("cuda", "linear_relu_gpu.py", "legit_cuda_linear_relu.py"),
    "nvrtc-elementwise": ("nvrtc", "elementwise_silu_bias_gpu.py", "legit_nvrtc_silu_bias.py"),
    "cpp-elementwise": ("cpp", "elementwise_silu_bias.py", "legit_cpp_silu_bias.py"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="cuda-elementwise,cuda-rows,nvrtc-elementwise")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for name in args.cases.split(","):
        backend, problem_name, candidate_name = CASES[name]
        device = "cpu" if backend == "cpp" else "cuda"
        problem = (CORPUS / "problems" / problem_name).read_text()
        source = (CORPUS / "candidates" / candidate_name).read_text()
        with Evaluator(EvalConfig(device=device, backend=backend)) as ev:
            first = ev.evaluate(problem, source)  # builds, warms the sandbox, caches the compile baseline
            print(name, "first", first.status.value, round(first.seconds["total"], 2), flush=True)
            for _ in range(args.repeats):
                t0 = time.monotonic()
                verdict = ev.evaluate(problem, source)
                turn = time.monotonic() - t0
                rows.append({"case": name, "turn_s": turn, "status": verdict.status.value, "seconds": verdict.seconds})
                print(name, verdict.status.value, f"{turn:.3f}",
                      json.dumps({k: round(v, 3) for k, v in verdict.seconds.items()}), flush=True)
        turns = [r["turn_s"] for r in rows if r["case"] == name]
        print(name, "p50", f"{statistics.median(turns):.3f}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
