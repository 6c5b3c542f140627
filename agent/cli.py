"""`python -m agent evaluate PROBLEM.py CANDIDATE.py --device cpu|cuda [--backend B] [--json]`.

With --json, stdout carries exactly one JSON verdict; everything else goes to stderr.
Exit status: 0 accepted, 1 evaluated but not accepted, 2 bad input (unreadable file, invalid problem).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from agent.evaluate import EvalConfig, Evaluator, ProblemError
from agent.verdict import Verdict


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent", description="Kernel Studio's agent and evaluation engine.")
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="build, verify and benchmark a candidate against a problem")
    ev.add_argument("problem", type=Path, help="KernelBench-format problem: Model, get_inputs, get_init_inputs")
    ev.add_argument("candidate", type=Path, help="candidate module defining ModelNew")
    ev.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ev.add_argument("--backend", choices=("cuda", "nvrtc", "triton", "cpp"), default=None,
                    help="default: guessed from the candidate's source")
    ev.add_argument("--json", action="store_true", help="print exactly one JSON verdict on stdout")
    ev.add_argument("--no-timing", action="store_true", help="check correctness only")
    ev.add_argument("--no-compile-baseline", action="store_true", help="skip the torch.compile baseline")
    ev.add_argument("--profile", action="store_true", help="attach a profiler summary")
    ev.add_argument("--seed", type=int, default=None, help="fix the secret seed (to reproduce a verdict)")
    ev.add_argument("--allow-ops", default="", help="extra ATen ops the candidate may call, comma-separated")
    ev.add_argument("--cache-dir", type=Path, default=None, help="build cache (default: $KSTUDIO_CACHE_DIR or .cache/kstudio)")
    bd = sub.add_parser("build", help="compile a candidate's extensions into the shared build cache (no GPU needed)")
    bd.add_argument("candidate", type=Path, help="candidate module defining ModelNew")
    bd.add_argument("--device", choices=("cpu", "cuda"), default="cuda", help="the device the build is for")
    bd.add_argument("--json", action="store_true", help="print the build report as JSON")
    bd.add_argument("--cache-dir", type=Path, default=None, help="build cache (default: $KSTUDIO_CACHE_DIR or .cache/kstudio)")
    return parser


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(_fail(f"cannot read the {what} {path}: {exc}"))


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _human(verdict: Verdict) -> str:
    lines = [f"status: {verdict.status.value}  ({verdict.stage.value})", verdict.message]
    for f in verdict.flags:
        lines.append(f"  flag {f.flag.value}: {f.detail}")
    for t in verdict.trials:
        lines.append(f"  trial {t.index} {t.distribution:<12} {'ok ' if t.passed else 'BAD'} max abs {t.max_abs_error:.3g} "
                     f"max rel {t.max_rel_error:.3g}")
    if verdict.timing:
        t = verdict.timing
        lines.append(f"  candidate {t.candidate_ms:.4f} ms | eager {t.eager_ms:.4f} ms ({t.speedup_vs_eager:.2f}x)"
                     + (f" | torch.compile {t.compile_ms:.4f} ms ({t.speedup_vs_compile:.2f}x)" if t.compile_ms else ""))
    return "\n".join(lines)


def evaluate_command(args: argparse.Namespace) -> int:
    problem = _read(args.problem, "problem")
    candidate = _read(args.candidate, "candidate")
    config = EvalConfig(device=args.device, backend=args.backend, timing=not args.no_timing,
                        compile_baseline=not args.no_compile_baseline, profile=args.profile, seed=args.seed,
                        allowed_ops=tuple(o.strip() for o in args.allow_ops.split(",") if o.strip()))
    try:
        with Evaluator(config, cache_root=args.cache_dir) as evaluator:
            verdict = evaluator.evaluate(problem, candidate)
    except ProblemError as exc:
        return _fail(str(exc))
    if args.json:
        json.dump(verdict.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(_human(verdict))
    return 0 if verdict.accepted else 1


def build_command(args: argparse.Namespace) -> int:
    candidate = _read(args.candidate, "candidate")
    with Evaluator(EvalConfig(device=args.device), cache_root=args.cache_dir) as evaluator:
        info, header = evaluator.build(candidate)
    report = {"ok": bool(header.get("ok")), "error": header.get("error"), "build": dataclasses.asdict(info)}
    if args.json:
        json.dump(report, sys.stdout)
        sys.stdout.write("\n")
    else:
        status = "built" if report["ok"] else f"build failed: {report['error']}"
        print(f"{args.candidate}: {status} in {info.seconds:.1f} s ({info.cache_hits} cached, {info.cache_misses} compiled)")
    return 0 if report["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "evaluate":
        return evaluate_command(args)
    if args.command == "build":
        return build_command(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
