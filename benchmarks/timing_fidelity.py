"""Timing fidelity on a GPU: is the engine's candidate median stable, and does it agree with
`triton.testing.do_bench` on the same call?

For each corpus candidate: 5 full evaluations (fresh sandboxed children, fresh secret inputs), their
candidate medians, the spread (max - min) / mean; then do_bench's median of the same module on the
same input shapes, measured in this process (our own corpus kernels, so loading them here is safe).

Usage: python benchmarks/timing_fidelity.py --json out.json
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from agent.engine.evaluate import EvalConfig, Evaluator  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"
CASES = [
    ("elementwise_silu_bias_gpu.py", "legit_cuda_silu_bias.py"),
    ("softmax_rows_gpu.py", "legit_cuda_softmax_rows.py"),
    ("linear_relu_gpu.py", "legit_cuda_linear_relu.py"),
    ("sum_rows_gpu.py", "legit_cuda_sum_rows.py"),
]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def do_bench_median(problem_path: Path, candidate_path: Path) -> float:
    import triton.testing

    problem, cand = _load(problem_path, "fid_problem"), _load(candidate_path, "fid_candidate")
    torch.manual_seed(0)
    init = problem.get_init_inputs()
    model = cand.ModelNew(*init).cuda().eval()
    args = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    with torch.no_grad():
        return triton.testing.do_bench(lambda: model(*args), warmup=100, rep=500, return_mode="median")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", type=int, default=len(CASES), help="how many of CASES to run")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    config = EvalConfig(device="cuda", compile_baseline=False)
    with Evaluator(config) as ev:
        for problem_name, candidate_name in CASES[: args.cases]:
            problem_path, cand_path = CORPUS / "problems" / problem_name, CORPUS / "candidates" / candidate_name
            medians, statuses = [], []
            for _ in range(args.repeats):
                verdict = ev.evaluate(problem_path.read_text(), cand_path.read_text())
                statuses.append(verdict.status.value)
                if verdict.timing:
                    medians.append(verdict.timing.candidate_ms)
            bench = do_bench_median(problem_path, cand_path)
            mean = statistics.mean(medians) if medians else float("nan")
            rows.append({
                "candidate": candidate_name, "statuses": statuses, "medians_ms": medians,
                "spread_pct": 100 * (max(medians) - min(medians)) / mean if medians else None,
                "do_bench_ms": bench, "vs_do_bench_pct": 100 * (statistics.median(medians) - bench) / bench if medians else None,
            })
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    print("| candidate | engine medians (ms) | spread | do_bench median (ms) | engine vs do_bench |")
    print("|---|---|---|---|---|")
    for r in rows:
        meds = ", ".join(f"{m:.4f}" for m in r["medians_ms"])
        print(f"| {r['candidate']} | {meds} | {r['spread_pct']:.2f}% | {r['do_bench_ms']:.4f} | {r['vs_do_bench_pct']:+.2f}% |")


if __name__ == "__main__":
    main()
