"""The launch form: what it refuses, with messages that say what to set, and the settings it builds."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from apps.training.forms import LaunchForm

pytestmark = pytest.mark.django_db


def _form(checkpoint: Path | str, **changes: Any) -> LaunchForm:
    data: dict[str, Any] = {"preset": "tiny-cpu", "stages": ["rft"], "base_model": str(checkpoint),
                            "num_processes": 1, "max_problems": 500}
    data.update(changes)
    return LaunchForm(data={k: v for k, v in data.items() if v is not None})


def test_it_builds_the_pipeline_from_the_preset_and_the_form(tiny_checkpoint, finished_agent_run) -> None:
    form = _form(tiny_checkpoint, stages=["rft", "grpo_single"], max_steps="2", learning_rate="0.01",
                 num_generations="2", max_completion_length="8", only_accepted="on", min_speedup="1.1")
    assert form.is_valid(), form.errors
    pipeline = form.cleaned_data["pipeline"]
    assert pipeline["stages"] == ["grpo_single", "rft"]  # the pipeline's order, not the ticking order
    assert pipeline["base_model"] == str(tiny_checkpoint) and pipeline["device"] == "cpu"
    assert pipeline["rft"]["max_steps"] == 2 and pipeline["grpo_single"]["max_steps"] == 2
    assert pipeline["rft"]["learning_rate"] == 0.01 and pipeline["grpo_single"]["max_completion_length"] == 8
    assert pipeline["critic"]["max_steps"] == 2 and pipeline["critic"]["learning_rate"] == 1e-3  # untouched: the preset's
    assert pipeline["data"]["min_speedup"] == 1.1
    assert form.cleaned_data["filters"].only_accepted is True


def test_it_refuses_a_base_model_directory_that_does_not_exist(tmp_path: Path) -> None:
    form = _form(tmp_path / "nowhere")
    assert not form.is_valid()
    assert "No directory at" in form.errors["base_model"][0] and "checkpoint directory" in form.errors["base_model"][0]


def test_it_refuses_a_directory_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    form = _form(tmp_path)
    assert not form.is_valid()
    assert "has no config.json" in form.errors["base_model"][0]


def test_it_refuses_a_checkpoint_without_its_tokenizer(tmp_path: Path, tiny_checkpoint: Path) -> None:
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((tiny_checkpoint / name).read_bytes())
    form = _form(tmp_path)
    assert not form.is_valid()
    assert "no tokenizer" in form.errors["base_model"][0]


def test_it_refuses_a_relative_path_and_an_unknown_random_model() -> None:
    assert "absolute path" in _form("models/tiny").errors["base_model"][0]
    assert "random:tiny" in _form("random:huge").errors["base_model"][0]


def test_it_asks_for_at_least_one_stage(tiny_checkpoint) -> None:
    form = _form(tiny_checkpoint, stages=None)
    assert form.errors["stages"] == ["Choose at least one stage to run."]


def test_it_refuses_hyperparameters_out_of_range(tiny_checkpoint) -> None:
    form = _form(tiny_checkpoint, learning_rate="5", max_steps="0", batch_size="-1")
    assert not form.is_valid()
    assert set(form.errors) >= {"learning_rate", "max_steps", "batch_size"}
    assert "less than or equal to 1.0" in form.errors["learning_rate"][0]


def test_it_shows_the_trainers_own_check_on_the_field_it_is_about(tiny_checkpoint, problem) -> None:
    # GRPO trains whole groups: 3 completions per prompt cannot fill a batch of 2.
    form = _form(tiny_checkpoint, stages=["grpo_single"], num_generations="3", batch_size="2")
    assert not form.is_valid()
    message = form.errors["batch_size"][0]
    assert "must be a multiple of grpo_single.num_generations (3)" in message and "preset tiny-cpu" in message


def test_it_says_a_stage_has_no_data_before_anything_is_queued(tiny_checkpoint, problem) -> None:
    form = _form(tiny_checkpoint, stages=["rft"])  # no agent run has finished yet
    assert not form.is_valid()
    assert "Stage rft trains on agent runs' trajectories" in form.non_field_errors()[0]
    form = _form(tiny_checkpoint, stages=["grpo_single"], problem_name_contains="no such problem")
    assert not form.is_valid()
    assert "no problem matches the problem filters" in form.non_field_errors()[0]
    assert _form(tiny_checkpoint, stages=["grpo_single"]).is_valid()  # the uploaded problem
