"""What a training run reports while it runs: one JSON line per logged step in OUT_DIR/metrics.jsonl (the
studio reads it live), and a human-readable line per step on stderr.

    {"stage": "grpo_single", "step": 3, "loss": 0.01, "reward": -1.0, "time": 1763800000.1,
     "step_seconds": 1.9, "peak_memory_gb": 0.4, ...every other value the TRL trainer logged}
"""
from __future__ import annotations

import json
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from trainer.environment import ToolLog


class MetricsLog:
    """Appends JSON lines to a file, flushed line by line so a reader never waits for a buffer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(record, default=_plain) + "\n")
            out.flush()


def peak_memory_gb(device: str) -> float:
    """Peak memory of this process so far: the CUDA caching allocator's peak on a GPU, the peak resident set
    on the CPU."""
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # ru_maxrss is in KiB on Linux


class StageProgress(TrainerCallback):
    """Writes every log event of a stage's trainer to the metrics log (main process only) and to stderr, with
    the time of the step that produced it and the peak memory. The end-of-training summary (train_runtime,
    train_loss) is kept in `summary` instead: it belongs to the stage's result, not to a step."""

    def __init__(self, stage: str, metrics: MetricsLog, device: str, tool_log: ToolLog | None = None) -> None:
        self.stage = stage
        self.metrics = metrics
        self.device = device
        self.tool_log = tool_log
        self.summary: dict[str, Any] = {}
        self.step_seconds: list[float] = []
        self._step_started = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._step_started = time.perf_counter()
        if self.tool_log is not None:
            self.tool_log.step = state.global_step + 1

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.step_seconds.append(time.perf_counter() - self._step_started)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or not logs:
            return
        if "train_runtime" in logs:
            self.summary = {k: _plain(v) for k, v in logs.items()}
            return
        record = {"stage": self.stage, "step": state.global_step, "loss": _number(logs.get("loss")),
                  "reward": _number(logs.get("reward")), "time": time.time(),
                  "step_seconds": self.step_seconds[-1] if self.step_seconds else None,
                  "peak_memory_gb": peak_memory_gb(self.device)}
        record.update({k: _plain(v) for k, v in logs.items() if k not in record})
        self.metrics.write(record)
        total = f"/{state.max_steps}" if state.max_steps and state.max_steps > 0 else ""
        parts = [f"[{self.stage}] step {state.global_step}{total}"]
        for key in ("loss", "reward"):
            if record[key] is not None:
                parts.append(f"{key} {record[key]:.4g}")
        if record["step_seconds"] is not None:
            parts.append(f"{record['step_seconds']:.2f} s/step")
        parts.append(f"peak memory {record['peak_memory_gb']:.2f} GB")
        print(", ".join(parts), file=sys.stderr, flush=True)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _plain(value: Any) -> Any:
    """A JSON-safe value: tensors and numpy scalars as numbers, NaN and infinities as null."""
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)
