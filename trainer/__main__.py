"""python -m trainer: the training pipeline's command line.

    python -m trainer run --config CONFIG.yaml --data DATA_DIR --output OUT_DIR
    python -m trainer tiny-model OUT_DIR [--size tiny|small]
    python -m trainer problems PROBLEMS.jsonl FILE.py... --device cpu|cuda
    python -m trainer settings

`run` is what `accelerate launch` starts (trainer.launch.command): exit status 0 when every stage trained, 1 on
an error (one line on stderr says what; OUT_DIR/result.json says status "failed" with it), 2 for bad arguments.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

# Training never reaches the Hub: checkpoints are local directories, and a missing file must fail, not download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # environment_factory is experimental in TRL 1.16; we pin it


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the configured stages")
    run.add_argument("--config", required=True, type=Path, help="pipeline settings (YAML; see trainer/presets/)")
    run.add_argument("--data", required=True, type=Path, help="directory with trajectories/ and/or problems.jsonl")
    run.add_argument("--output", required=True, type=Path, help="where checkpoints, metrics and result.json go")
    tiny = commands.add_parser("tiny-model", help="write a random Qwen2 chat checkpoint built from a config")
    tiny.add_argument("out_dir", type=Path)
    tiny.add_argument("--size", choices=("tiny", "small"), default="tiny")
    problems = commands.add_parser("problems", help="write problems.jsonl from problem modules")
    problems.add_argument("out_file", type=Path)
    problems.add_argument("files", nargs="+", type=Path, help="modules in KernelBench's format")
    problems.add_argument("--device", choices=("cpu", "cuda"), required=True)
    commands.add_parser("settings", help="list every pipeline setting with its help")
    args = parser.parse_args(argv)

    if args.command == "run":
        return _run(args.config, args.data, args.output)
    if args.command == "tiny-model":
        from trainer.tiny import build

        print(build(args.out_dir, size=args.size))
        return 0
    if args.command == "problems":
        return _problems(args.out_file, args.files, args.device)
    from trainer.config import help_text

    for name, text in help_text():
        print(f"{name}\n    {text}")
    return 0


def _run(config_path: Path, data_dir: Path, out_dir: Path) -> int:
    from trainer.config import ConfigError, PipelineConfig
    from trainer.data import DataError
    from trainer.pipeline import describe, run
    from trainer.stages.common import StageError

    try:
        config = PipelineConfig.from_yaml(config_path)
    except ConfigError as exc:
        print(f"trainer: error: {exc}", file=sys.stderr)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "result.json").write_text(json.dumps({"status": "failed", "error": str(exc), "stages": []}) + "\n")
        return 1
    try:
        result = run(config, data_dir, out_dir)
    except (ConfigError, DataError, StageError) as exc:
        print(f"trainer: error: {describe(exc)}", file=sys.stderr)
        return 1
    except Exception as exc:  # not a bad input: keep the traceback for whoever debugs it, then the one line
        traceback.print_exc()
        print(f"trainer: error: {describe(exc)}", file=sys.stderr)
        return 1
    print(f"[pipeline] done: {len(result['stages'])} stage(s) in {result['seconds']:.1f} s, final policy in "
          f"{result['checkpoint']}", flush=True)
    return 0


def _problems(out_file: Path, files: list[Path], device: str) -> int:
    from agent.engine import validate_problem

    lines = []
    for path in files:
        source = path.read_text(encoding="utf-8")
        report = validate_problem(source)
        if not report.ok:
            print(f"trainer: error: {path} is not in KernelBench's format: "
                  + "; ".join(i.message for i in report.errors()), file=sys.stderr)
            return 1
        lines.append(json.dumps({"name": path.stem, "source": source, "device": device}))
    out_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} problem(s) to {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
