"""A run's DATA_DIR from the database, read back the way the trainer reads it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.runs.models import Run
from apps.training import dataset
from apps.training.dataset import DataFilters, TrainingDataError
from tests.trainer import records

pytestmark = pytest.mark.django_db


def test_it_writes_trajectories_and_problems_the_trainer_can_load(tmp_path: Path, finished_agent_run, problem) -> None:
    from trainer.data import load_inputs

    summary = dataset.write(DataFilters(), ["grpo_single", "rft"], "cpu", tmp_path / "data")
    assert summary == {"trajectories": 1, "problems": 2}
    inputs = load_inputs(tmp_path / "data")
    assert inputs.trajectories.num_rows == 1 and inputs.trajectories[0]["final_reward"] == 2.0
    assert sorted(p.name for p in inputs.problems) == ["row_sum.py", "silu_bias"]
    assert {p.device for p in inputs.problems} == {"cpu"}


def test_it_filters_trajectories_by_outcome_and_date(finished_agent_run) -> None:
    Run.objects.create(problem=finished_agent_run.problem, owner=finished_agent_run.owner, kind=Run.Kind.AGENT,
                       status=Run.Status.FINISHED, trajectory=records.failed())
    assert len(dataset.trajectory_records(DataFilters())) == 2
    assert [r["final_reward"] for r in dataset.trajectory_records(DataFilters(only_accepted=True))] == [2.0]
    assert dataset.trajectory_records(DataFilters(min_reward=3.0)) == []
    assert dataset.trajectory_records(DataFilters(since="2999-01-01")) == []


def test_it_filters_problems_and_leaves_out_broken_ones(problem, finished_agent_run) -> None:
    assert [r["name"] for r in dataset.problem_rows(DataFilters(problem_name_contains="SILU"), "cpu")] == ["silu_bias"]
    assert len(dataset.problem_rows(DataFilters(max_problems=1), "cpu")) == 1
    problem.runtime_error = "ImportError: no module named foo"
    problem.save()
    assert [r["name"] for r in dataset.problem_rows(DataFilters(), "cuda")] == ["row_sum.py"]
    assert json.loads(json.dumps(dataset.problem_rows(DataFilters(), "cuda")))[0]["device"] == "cuda"


def test_it_refuses_to_leave_a_stage_without_data(tmp_path: Path, problem) -> None:
    with pytest.raises(TrainingDataError, match="Stages rft and critic train on agent runs' trajectories"):
        dataset.write(DataFilters(), ["rft", "critic"], "cpu", tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_it_checks_its_filters() -> None:
    with pytest.raises(ValueError, match="problem_origin must be one of"):
        DataFilters(problem_origin="elsewhere")
    with pytest.raises(ValueError, match="since must be a date"):
        DataFilters(since="yesterday")
