"""`python -m trainer.synthesis --count N --out problems.jsonl [--seed S] [--existing DIR_OR_FILES...]
[--report report.json] [--device cpu|cuda]`: compose problems, write the kept ones one JSON object a line
({"name", "source", "device", "ops", "origin": "synthetic", "checks"}), print the report.

Exit status: 0 when `count` problems were kept, 1 when the attempts ran out first, 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.synthesis.config import SynthesisConfig
from trainer.synthesis.dedup import load_existing
from trainer.synthesis.pipeline import synthesize

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _parser() -> argparse.ArgumentParser:
    helps = SynthesisConfig.help()
    parser = argparse.ArgumentParser(prog="python -m trainer.synthesis",
                                     description="Compose new KernelBench-format problems from seed PyTorch ops.")
    parser.add_argument("--count", type=int, required=True, help=helps["count"])
    parser.add_argument("--out", type=Path, required=True, help="JSON lines file the kept problems are written to")
    parser.add_argument("--report", type=Path, default=None, help="also write the report as JSON here")
    parser.add_argument("--existing", type=Path, nargs="*", default=None,
                        help="problems a new one must not nearly duplicate: folders of .py files, .py files, .jsonl "
                             "files of problems (default: examples/)")
    parser.add_argument("--seed", type=int, default=0, help=helps["seed"])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help=helps["device"])
    parser.add_argument("--min-ops", type=int, default=1, help=helps["min_ops"])
    parser.add_argument("--max-ops", type=int, default=5, help=helps["max_ops"])
    parser.add_argument("--min-ms", type=float, default=None, help=helps["min_ms"])
    parser.add_argument("--max-ms", type=float, default=None, help=helps["max_ms"])
    parser.add_argument("--similarity", type=float, default=0.97, help=helps["similarity"])
    parser.add_argument("--no-compile-check", action="store_true", help="skip: " + helps["compile_check"])
    parser.add_argument("--timeout", type=float, default=120.0, help=helps["timeout_s"])
    parser.add_argument("--max-attempts", type=int, default=None, help=helps["max_attempts"])
    parser.add_argument("--threads", type=int, default=None, help=helps["threads"])
    parser.add_argument("--quiet", action="store_true", help="no line per candidate on stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = SynthesisConfig(count=args.count, seed=args.seed, device=args.device, min_ops=args.min_ops,
                                 max_ops=args.max_ops, min_ms=args.min_ms, max_ms=args.max_ms, similarity=args.similarity,
                                 compile_check=not args.no_compile_check, timeout_s=args.timeout,
                                 max_attempts=args.max_attempts, threads=args.threads)
        existing = load_existing(args.existing if args.existing is not None else [EXAMPLES])
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    result = synthesize(config, existing, progress=None if args.quiet else lambda line: print(line, file=sys.stderr))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for problem in result.problems:
            out.write(json.dumps(problem.to_record()) + "\n")
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(result.report.to_dict(), indent=2) + "\n", encoding="utf-8")
    print(result.report.text())
    print(f"wrote {len(result.problems)} problems to {args.out}")
    return 0 if result.report.kept >= config.count else 1
