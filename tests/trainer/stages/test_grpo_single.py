"""Stage (a): single-turn GRPO trains the tiny model for a few steps on rewards from the real engine."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from trainer.data import Problem
from trainer.rewards import Engine
from trainer.stages import grpo_single
from tests.trainer.conftest import context, tiny_config, weight
from tests.trainer.records import ROW_SUM


def test_it_trains_on_engine_rewards_logging_each_step(tiny_model: Path, engine: Engine, tmp_path: Path) -> None:
    ctx = context(tiny_config(tiny_model), engine, tmp_path, "1-grpo_single")
    summary = grpo_single.train(ctx, tiny_model, [Problem("row_sum", ROW_SUM, "cpu")])
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(line["stage"], line["step"]) for line in lines] == [("grpo_single", 1), ("grpo_single", 2)]
    for line in lines:
        assert isinstance(line["loss"], float) and line["step_seconds"] > 0 and line["peak_memory_gb"] > 0
        # A random model writes no kernel: every completion gets the failing reward, from the engine's reward.
        assert line["reward"] == -1.0 and line["rewards/engine/mean"] == -1.0
        assert line["entropy"] > 0  # the entropy bonus is what moves the policy while all rewards tie
    assert summary["steps"] == 2 and summary["problems"] == 1
    assert not torch.equal(weight(tiny_model), weight(summary["policy"]))
    assert (Path(summary["policy"]) / "chat_template.jinja").is_file()
