"""The metrics log: one JSON line per logged step, numbers as JSON numbers, NaN as null, the end-of-training
summary kept for the stage's result."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import torch

from trainer.metrics import MetricsLog, StageProgress


def state(step: int, main: bool = True) -> SimpleNamespace:
    return SimpleNamespace(global_step=step, max_steps=5, is_world_process_zero=main)


def test_it_writes_a_json_line_per_logged_step(tmp_path: Path, capsys) -> None:
    progress = StageProgress("rft", MetricsLog(tmp_path / "metrics.jsonl"), "cpu")
    progress.on_step_begin(None, state(0), None)
    progress.on_step_end(None, state(1), None)
    progress.on_log(None, state(1), None, logs={"loss": torch.tensor(0.5), "grad_norm": float("nan"), "epoch": 1})
    progress.on_log(None, state(1, main=False), None, logs={"loss": 0.4})  # another process: not written
    progress.on_log(None, state(5), None, logs={"train_runtime": 3.0, "train_loss": 0.45})
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 1
    line = lines[0]
    assert (line["stage"], line["step"], line["loss"], line["reward"], line["grad_norm"]) == ("rft", 1, 0.5, None, None)
    assert line["time"] > 1.7e9 and line["step_seconds"] >= 0 and line["peak_memory_gb"] > 0
    assert progress.summary == {"train_runtime": 3.0, "train_loss": 0.45}
    assert "[rft] step 1/5, loss 0.5" in capsys.readouterr().err
