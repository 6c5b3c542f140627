"""Turn latency of the evaluation engine, per backend, against a naive KernelBench-style turn.

For each (backend, candidate) it measures, in one run on one machine:
  cold build      a fresh cache (nothing compiled, no precompiled header)
  new source      a never-seen source with a warm toolchain (the agent's usual turn: PCH etc. exist)
  cache-hit build the same source again (build lookup only)
  hit turn        build lookup + full evaluation (trials, timing, baselines cached), p50 over repeats
  cold turn       new source build + full evaluation
  naive turn      a fresh Python process: import torch, uncached load_inline, one reference run, one
                  candidate run, one comparison (what KernelBench-style harnesses do per evaluation)

Usage: python benchmarks/turn_latency.py --device cuda --repeats 5 --json out.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.engine.evaluate import EvalConfig, Evaluator  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"

# (backend, label, problem, candidate) — the kernels are the corpus's legitimate candidates.
CASES = {
    "cuda": [
        ("elementwise", "elementwise_silu_bias_gpu.py", "legit_cuda_silu_bias.py"),
        ("row reduction", "softmax_rows_gpu.py", "legit_cuda_softmax_rows.py"),
        ("matmul+epilogue", "linear_relu_gpu.py", "legit_cuda_linear_relu.py"),
    ],
    "nvrtc": [
        ("elementwise", "elementwise_silu_bias_gpu.py", "legit_nvrtc_silu_bias.py"),
    ],
    "triton": [
        ("elementwise", "elementwise_silu_bias_gpu.py", "legit_triton_silu_bias.py"),
    ],
    "cpp": [
        ("elementwise", "elementwise_silu_bias.py", "legit_cpp_silu_bias.py"),
        ("row reduction", "softmax_rows.py", "legit_cpp_softmax_rows.py"),
        ("matmul+epilogue", "linear_relu.py", "legit_cpp_linear_relu.py"),
    ],
}

NAIVE = textwrap.dedent('''
    import sys, time, importlib.util, torch
    t0 = time.perf_counter()
    device = sys.argv[3]
    def load(path, name):
        spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m); return m
    problem = load(sys.argv[1], "problem")
    cand = load(sys.argv[2], "cand")          # uncached load_inline happens here
    torch.manual_seed(0)
    init = problem.get_init_inputs(); ref = problem.Model(*init).to(device)
    torch.manual_seed(0)
    new = cand.ModelNew(*init).to(device)
    xs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    with torch.no_grad():
        ok = torch.allclose(ref(*xs), new(*xs), atol=1e-2, rtol=1e-2)
    if device == "cuda": torch.cuda.synchronize()
    print("naive correct", ok, round(time.perf_counter() - t0, 2))
''')


def fresh_source(path: Path, tag: str) -> str:
    """The candidate with a comment inside its kernel source: a never-seen kernel to compile."""
    text = path.read_text()
    for anchor in ("#include", 'extern "C"'):
        if anchor in text:
            return text.replace(anchor, f"// fresh {tag}\n{anchor}", 1)
    if "@triton.jit" in text:
        # Triton hashes the jitted function's own source: the comment goes inside its body.
        body = text.index("):\n", text.index("@triton.jit")) + 3
        return text[:body] + f"    # fresh {tag}\n" + text[body:]
    raise ValueError(f"{path} has no kernel source to make fresh")


def naive_turn(problem: Path, candidate: Path, device: str) -> float:
    with tempfile.TemporaryDirectory() as ext_dir:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir)
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", NAIVE, str(problem), str(candidate), device],
                              capture_output=True, text=True, env=env, timeout=1800)
        elapsed = time.monotonic() - started
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return float("nan")
    return elapsed


def run_case(device: str, backend: str, label: str, problem_name: str, candidate_name: str, repeats: int,
             naive: bool) -> dict:
    problem = (CORPUS / "problems" / problem_name).read_text()
    cand_path = CORPUS / "candidates" / candidate_name
    config = EvalConfig(device=device, backend=backend)
    row: dict = {"backend": backend, "case": label, "candidate": candidate_name}
    stamp = f"{time.time_ns()}"
    with tempfile.TemporaryDirectory() as cold_root:
        with Evaluator(config, cache_root=Path(cold_root)) as ev:
            t0 = time.monotonic()
            info, header = ev.build(cand_path.read_text())
            row["cold_build_s"] = time.monotonic() - t0
            row["cold_build_ok"] = bool(header.get("ok"))
    shared = Path(os.environ.get("KSTUDIO_CACHE_DIR", ROOT / ".cache" / "kstudio"))
    with Evaluator(config, cache_root=shared) as ev:
        ev.evaluate(problem, cand_path.read_text())  # warms the sandbox, builds, caches the compile baseline
        source = fresh_source(cand_path, stamp)
        t0 = time.monotonic()
        ev.build(source)
        row["new_source_build_s"] = time.monotonic() - t0
        t0 = time.monotonic()
        ev.build(source)
        row["hit_build_s"] = time.monotonic() - t0
        turns, verdicts = [], []
        for _ in range(repeats):
            t0 = time.monotonic()
            verdict = ev.evaluate(problem, source)
            turns.append(time.monotonic() - t0)
            verdicts.append(verdict)
        row["hit_turn_p50_s"] = statistics.median(turns)
        row["hit_turn_all_s"] = turns
        row["status"] = verdicts[-1].status.value
        row["speedup_vs_eager"] = verdicts[-1].timing.speedup_vs_eager if verdicts[-1].timing else None
        row["stage_seconds"] = verdicts[-1].seconds
        t0 = time.monotonic()
        cold = ev.evaluate(problem, fresh_source(cand_path, stamp + "cold"))
        row["cold_turn_s"] = time.monotonic() - t0
        row["cold_turn_status"] = cold.status.value
    if naive and backend in ("cuda", "cpp"):
        row["naive_turn_s"] = naive_turn(CORPUS / "problems" / problem_name, cand_path, device)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--backends", default=None, help="comma-separated (default: all for the device)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default=None, help="comma-separated case labels (default: all)")
    parser.add_argument("--naive", action="store_true", help="also time the naive fresh-process turn")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    backends = args.backends.split(",") if args.backends else (["cuda", "nvrtc", "triton"] if args.device == "cuda" else ["cpp"])
    rows = []
    for backend in backends:
        for label, problem, candidate in CASES[backend]:
            if args.only and label not in args.only.split(","):
                continue
            row = run_case(args.device, backend, label, problem, candidate, args.repeats, args.naive)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    cols = ["backend", "case", "cold_build_s", "new_source_build_s", "hit_build_s", "hit_turn_p50_s", "cold_turn_s",
            "naive_turn_s", "status", "speedup_vs_eager"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for row in rows:
        cells = [f"{row.get(c):.2f}" if isinstance(row.get(c), float) else str(row.get(c, "")) for c in cols]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
