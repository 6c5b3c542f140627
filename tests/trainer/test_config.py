"""The pipeline's settings: help on every field, clear messages for bad values, YAML round trips, presets."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from trainer.config import ConfigError, PipelineConfig, help_text
from tests.trainer.conftest import PRESETS


def test_it_has_help_on_every_setting_of_every_section() -> None:
    rows = help_text()
    names = [name for name, _ in rows]
    assert "grpo_multi.critic_weight" in names and "data.min_speedup" in names and "vllm_server_url" in names
    assert all(len(text) > 15 for _, text in rows), [name for name, text in rows if len(text) <= 15]


@pytest.mark.parametrize("settings, message", [
    ({"base_model": " "}, "base_model is required"),
    ({"base_model": "random:huge"}, "random:tiny"),
    ({"stages": ["grpo_single", "ppo"]}, "unknown names ['ppo']"),
    ({"stages": []}, "stages is empty"),
    ({"stages": ["rft", "rft"]}, "lists a stage twice"),
    ({"device": "tpu"}, "device must be one of auto, cpu, cuda"),
    ({"device": "cpu", "dtype": "bfloat16"}, "set dtype: float32"),
    ({"vllm_server_url": "gpu1:8000"}, "http(s) URL"),
    ({"grpo_single": {"num_generations": 1}}, "grpo_single.num_generations must be at least 2"),
    ({"grpo_single": {"batch_size": 6, "num_generations": 4}}, "must be a multiple of grpo_single.num_generations"),
    ({"grpo_multi": {"critic_weight": -1}}, "grpo_multi.critic_weight must be >= 0"),
    ({"rft": {"max_steps": 0}}, "rft.max_steps must be at least 1, or -1"),
    ({"critic": {"learning_rate": 0}}, "critic.learning_rate must be positive"),
    ({"data": {"max_repeated_calls": 0}}, "data.max_repeated_calls must be at least 1"),
    ({"reward": {"min_rounds": 0}}, "reward.min_rounds must be at least 1"),
    ({"grpo_single": {"max_steps": "many"}}, "grpo_single.max_steps must be an integer, not 'many'"),
    ({"rft": {"learnin_rate": 1e-5}}, "rft has unknown settings ['learnin_rate']"),
    ({"seed": None}, "seed must be set"),
    ({"data": [1, 2]}, "data must be a mapping"),
])
def test_it_rejects_bad_settings_saying_what_to_set(settings: dict, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PipelineConfig.from_dict({"base_model": "random:tiny", **settings})
    assert message in str(caught.value)


def test_it_names_a_missing_required_setting_with_its_help() -> None:
    with pytest.raises(ConfigError, match="lacks the required setting base_model: The policy the first stage"):
        PipelineConfig.from_dict({"stages": ["rft"]})


def test_it_reads_yaml_numbers_written_without_a_dot() -> None:
    # YAML 1.1 reads 1e-6 as the string "1e-6"; a learning rate written that way must still work.
    config = PipelineConfig.from_dict(yaml.safe_load("base_model: random:tiny\nrft:\n  learning_rate: 1e-6\n"))
    assert config.rft.learning_rate == 1e-6


def test_it_round_trips_through_yaml(tmp_path: Path) -> None:
    config = PipelineConfig.from_dict({"base_model": "/models/x", "stages": ["rft", "grpo_multi"],
                                       "vllm_server_url": "http://127.0.0.1:8000",
                                       "grpo_multi": {"critic_weight": 0.5, "critic_path": "/models/critic"},
                                       "data": {"max_turns": 12}})
    config.to_yaml(tmp_path / "run.yaml")
    again = PipelineConfig.from_yaml(tmp_path / "run.yaml")
    assert again == config
    assert again.grpo_multi.critic_path == "/models/critic" and again.data.max_turns == 12


def test_it_says_when_the_file_is_not_a_mapping_or_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    (tmp_path / "broken.yaml").write_text("base_model: [unclosed\n")
    with pytest.raises(ConfigError, match="must hold a YAML mapping"):
        PipelineConfig.from_yaml(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        PipelineConfig.from_yaml(tmp_path / "broken.yaml")
    with pytest.raises(ConfigError, match="cannot read the config"):
        PipelineConfig.from_yaml(tmp_path / "missing.yaml")


@pytest.mark.parametrize("preset", sorted(p.name for p in PRESETS.glob("*.yaml")))
def test_it_loads_every_preset(preset: str) -> None:
    config = PipelineConfig.from_yaml(PRESETS / preset)
    assert config.stages
    # Every setting a preset writes is one the config knows (from_yaml would have refused others) and the
    # preset survives a round trip unchanged.
    assert PipelineConfig.from_dict(dataclasses.asdict(config)) == config
