"""Shared by the trainer's tests: one tiny random Qwen2 checkpoint (trainer.tiny, offline), one evaluation
engine with its own build cache, and the tiny-cpu preset as the starting point of every test's settings."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Before transformers is imported (the Hub client reads it once): nothing here may reach the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from safetensors.torch import load_file

from trainer.config import PipelineConfig
from trainer.metrics import MetricsLog
from trainer.rewards import Engine
from trainer.stages.common import StageContext
from trainer.tiny import build

PRESETS = Path(__file__).resolve().parents[2] / "trainer" / "presets"
# A weight every stage trains (the policy's and the critic's transformer share it).
WEIGHT = "model.layers.0.mlp.down_proj.weight"


def tiny_config(model: Path | str, **sections: Any) -> PipelineConfig:
    """The tiny-cpu preset with `base_model` set and some settings replaced: sections={"rft": {"max_steps": 3}}."""
    data = PipelineConfig.from_yaml(PRESETS / "tiny-cpu.yaml").to_dict()
    data["base_model"] = str(model)
    for key, value in sections.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) else value
    return PipelineConfig.from_dict(data)


def context(config: PipelineConfig, engine: Engine, root: Path, stage: str) -> StageContext:
    return StageContext(config, "cpu", MetricsLog(root / "metrics.jsonl"), engine, root / "stages" / stage)


def weight(checkpoint: Path | str, name: str = WEIGHT) -> torch.Tensor:
    return load_file(str(Path(checkpoint) / "model.safetensors"))[name]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("trainer-tiny") / "model")


@pytest.fixture(scope="session")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    """Light but real evaluations (one trial plus the extra distributions, short timing, no torch.compile)."""
    reward = tiny_config("random:tiny").reward
    reward.cache_dir = str(tmp_path_factory.mktemp("trainer-build-cache"))
    engine = Engine(reward)
    yield engine
    engine.close()
