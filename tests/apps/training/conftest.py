"""Shared by the training app's tests: a tiny random Qwen2 checkpoint (trainer.tiny, offline), the training
directory in a temporary place, and a finished agent run whose trajectory rejection fine-tuning keeps."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach the Hub

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from trainer.tiny import build

    return build(tmp_path_factory.mktemp("training-tiny") / "model")


@pytest.fixture
def training_dir(settings, tmp_path: Path) -> Path:
    settings.KSTUDIO_TRAINING_DIR = str(tmp_path / "training")
    return tmp_path / "training"


@pytest.fixture
def finished_agent_run(owner):
    """An agent run that ended with an accepted, submitted candidate: its stored trajectory has the shape
    agent.loop.trajectory.to_record writes (built by tests/trainer/records.py from the agent's real prompt and tools)."""
    from apps.problems.models import Problem
    from apps.runs.models import Run
    from tests.trainer import records

    problem = Problem.objects.create(owner=owner, name="row_sum.py", source=records.ROW_SUM, source_hash="row-sum")
    return Run.objects.create(problem=problem, owner=owner, kind=Run.Kind.AGENT, status=Run.Status.FINISHED,
                              stage=Run.Stage.DONE, trajectory=records.good())
