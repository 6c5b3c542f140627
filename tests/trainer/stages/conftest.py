"""A critic trained once (stage (c) on the tiny model) for the critic's own test and for stage (d)'s shaping."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainer.data import load_inputs
from trainer.rewards import Engine
from trainer.stages import critic
from tests.trainer.conftest import context, tiny_config
from tests.trainer.records import failed, good, write_data


@pytest.fixture(scope="session")
def trained_critic(tiny_model: Path, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The critic stage's summary, plus `root`: the directory holding its metrics.jsonl."""
    root = tmp_path_factory.mktemp("critic")
    inputs = load_inputs(write_data(root / "data", [good(), failed(), good(2.0)]))
    summary = critic.train(context(tiny_config(tiny_model), engine, root, "3-critic"), tiny_model, inputs.trajectories)
    return {**summary, "root": root}
