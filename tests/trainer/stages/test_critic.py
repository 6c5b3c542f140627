"""Stage (c): the critic learns trajectories' outcomes; stage (d) reads its predictions as reward shaping."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForSequenceClassification

from trainer.stages import critic
from tests.trainer.conftest import weight


def test_it_trains_a_value_model_on_outcomes(tiny_model: Path, trained_critic: dict[str, Any]) -> None:
    lines = [json.loads(line) for line in (trained_critic["root"] / "metrics.jsonl").read_text().splitlines()]
    assert [(line["stage"], line["step"]) for line in lines] == [("critic", 1), ("critic", 2)]
    assert all(line["loss"] > 0 for line in lines)
    assert trained_critic["policy"] == str(tiny_model.resolve())  # the policy passes through unchanged
    assert trained_critic["trajectories"] == 3 and trained_critic["target_mean"] == 1.0
    saved = Path(trained_critic["critic"])
    assert not torch.equal(weight(tiny_model), weight(saved))
    model = AutoModelForSequenceClassification.from_pretrained(saved, local_files_only=True)
    assert model.config.num_labels == 1 and model.config.problem_type == "regression"


def test_it_scores_rollouts_with_the_critic(trained_critic: dict[str, Any]) -> None:
    reward = critic.CriticReward(trained_critic["critic"], "cpu", max_length=512)
    prompt = [{"role": "user", "content": "Write ModelNew."}]
    values = reward([prompt, prompt], [[{"role": "assistant", "content": "x"}],
                                       [{"role": "assistant", "content": "a longer answer"}]])
    assert len(values) == 2 and all(isinstance(v, float) for v in values) and values[0] != values[1]
