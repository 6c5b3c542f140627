"""The staged training run: the configured stages in order, each starting from the policy the previous one
wrote, with one metrics log, one evaluation engine, and a result file whatever happens.

OUT_DIR afterwards:
    config.yaml          the settings the run used
    metrics.jsonl        one JSON line per logged step of every stage (trainer.metrics)
    stages/<n>-<stage>/  each stage's policy (or critic) and logs (the multi-turn stage's tool_calls.jsonl)
    final/               the last stage's policy: model and tokenizer with its chat template
    result.json          {"status": "succeeded", "checkpoint": ..., "stages": [...]} or status "failed", "error"
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from trainer import data as data_module
from trainer.config import PipelineConfig
from trainer.data import DataError, FilterReport, Inputs
from trainer.metrics import MetricsLog
from trainer.rewards import Engine
from trainer.stages import critic, grpo_multi, grpo_single, rft
from trainer.stages.common import StageContext, StageError, release_memory, resolve_device

RESULT_FILE = "result.json"
METRICS_FILE = "metrics.jsonl"
FINAL_DIR = "final"


def run(config: PipelineConfig, data_dir: Path | str, out_dir: Path | str) -> dict[str, Any]:
    """Run the pipeline; returns the result written to OUT_DIR/result.json. On an error, result.json says
    status "failed" with the error, and the exception propagates."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    main = _is_main_process()
    stages: list[dict[str, Any]] = []
    try:
        result = _run(config, Path(data_dir), out_dir, stages, main)
    except BaseException as exc:
        if main:
            _write_result(out_dir, {"status": "failed", "error": describe(exc), "stages": stages})
        raise
    if main:
        _write_result(out_dir, result)
    return result


def describe(exc: BaseException) -> str:
    """An error in one line: its message, with its type where the type is not one of ours."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    ours = (DataError, StageError, ValueError)
    return text if isinstance(exc, ours) else f"{type(exc).__name__}: {text}"


def _run(config: PipelineConfig, data_dir: Path, out_dir: Path, stages: list[dict[str, Any]],
         main: bool) -> dict[str, Any]:
    started = time.monotonic()
    device = resolve_device(config.device)
    inputs = data_module.load_inputs(data_dir)
    rft_data = _check_inputs(config, inputs, data_dir)
    if main:
        config.to_yaml(out_dir / "config.yaml")
    metrics = MetricsLog(out_dir / METRICS_FILE)
    policy = base_model(config, out_dir, main)
    critic_path = Path(config.grpo_multi.critic_path) if config.grpo_multi.critic_path else None
    engine = Engine(config.reward)
    try:
        for index, name in enumerate(config.stages, start=1):
            ctx = StageContext(config, device, metrics, engine, out_dir / "stages" / f"{index}-{name}")
            print(f"[pipeline] stage {index}/{len(config.stages)}: {name}, from {policy}", flush=True)
            if name == "grpo_single":
                assert inputs.problems is not None
                summary = grpo_single.train(ctx, policy, inputs.problems)
            elif name == "rft":
                assert rft_data is not None
                summary = rft.train(ctx, policy, *rft_data)
            elif name == "critic":
                assert inputs.trajectories is not None
                summary = critic.train(ctx, policy, inputs.trajectories)
                critic_path = Path(summary["critic"])
            else:
                summary = grpo_multi.train(ctx, policy, inputs, critic_path)
            stages.append({"stage": name, **summary})
            policy = Path(summary["policy"])
            release_memory()
    finally:
        engine.close()
    final = out_dir / FINAL_DIR
    if main:
        _publish(policy, final, out_dir)
        stages[-1]["policy"] = str(final) if policy.is_relative_to(out_dir / "stages") else stages[-1]["policy"]
    return {"status": "succeeded", "checkpoint": str(final), "stages": stages,
            "seconds": round(time.monotonic() - started, 3)}


def _check_inputs(config: PipelineConfig, inputs: Inputs, data_dir: Path) -> tuple[Any, FilterReport] | None:
    """Fail before any training when a stage lacks its data. Returns rejection fine-tuning's dataset and
    filter report when that stage runs."""
    wanted = set(config.stages)
    if "grpo_single" in wanted and inputs.problems is None:
        raise DataError(f"stage grpo_single needs problems: write {data_dir / data_module.PROBLEMS_FILE} (one "
                        f'{{"name", "source", "device"}} object a line; python -m trainer problems writes one)')
    if wanted & {"rft", "critic"} and inputs.trajectories is None:
        raise DataError(f"stages rft and critic need trajectories: save the exported runs to "
                        f"{data_dir / data_module.TRAJECTORIES_DIR} (agent.export.dataset.save, manage.py export_trajectories)")
    if "rft" not in wanted:
        return None
    assert inputs.trajectories is not None
    dataset, report = data_module.rft_dataset(inputs.trajectories, config.data)
    print(f"[pipeline] rejection fine-tuning data: {report}", flush=True)
    if report.kept == 0:
        raise DataError(f"no trajectory passed rejection fine-tuning's filters ({report}); lower data.min_speedup "
                        f"or raise data.max_turns, or collect more successful runs")
    return dataset, report


def base_model(config: PipelineConfig, out_dir: Path, main: bool) -> Path:
    """The first stage's policy: the configured checkpoint directory, or a random model built from a config
    (random:tiny, random:small) under OUT_DIR/base-model; the main process builds it while the others wait."""
    if not config.base_model.startswith("random:"):
        path = Path(config.base_model)
        if not (path / "config.json").is_file():
            raise DataError(f"base_model {path} is not a transformers checkpoint directory (no config.json there); "
                            f"set base_model to the directory save_pretrained() wrote, or random:tiny")
        return path.resolve()
    from trainer.tiny import build

    path, done = out_dir / "base-model", out_dir / "base-model" / ".complete"
    if main and not done.exists():
        build(path, size=config.base_model.split(":", 1)[1], seed=config.seed)
        done.touch()
    deadline = time.monotonic() + 600
    while not done.exists():
        if time.monotonic() > deadline:
            raise StageError(f"the main process did not build the base model in {path} within 10 minutes")
        time.sleep(1)
    return path


def _publish(policy: Path, final: Path, out_dir: Path) -> None:
    """The last policy becomes OUT_DIR/final: moved when a stage of this run wrote it (no second copy of the
    weights), copied when it is the base model (a run of the critic stage alone)."""
    if final.exists():
        shutil.rmtree(final)
    if policy.is_relative_to(out_dir / "stages"):
        shutil.move(str(policy), str(final))
    else:
        shutil.copytree(policy, final, ignore=shutil.ignore_patterns(".complete"))


def _write_result(out_dir: Path, result: dict[str, Any]) -> None:
    path = out_dir / RESULT_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)  # a reader never sees half a file


def _is_main_process() -> bool:
    """Process 0 of an `accelerate launch` (which sets RANK), or a plain single process."""
    return int(os.environ.get("RANK", "0")) == 0
