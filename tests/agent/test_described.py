"""Every setting says what it means (agent/described.py): each field of the config dataclasses carries its help,
which the command line, the studio's forms and the API show."""
from __future__ import annotations

import dataclasses

import pytest

from agent.described import help_of
from agent.engine import EvalConfig, Limits
from agent.loop import Budgets, PolicySpec
from trainer import config as trainer_config

CONFIGS = [EvalConfig, Limits, Budgets, PolicySpec,
           *(c for c in vars(trainer_config).values() if dataclasses.is_dataclass(c) and c.__module__ == trainer_config.__name__)]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.__name__)
def test_every_field_of_every_config_has_help(config: type) -> None:
    missing = [f.name for f in dataclasses.fields(config) if len(f.metadata.get("help", "")) < 10]
    assert not missing, f"{config.__name__} fields without help: {missing}"


def test_help_of_reads_the_fields_help_and_names_what_is_missing() -> None:
    assert help_of(Budgets, "max_turns").startswith("Model turns")
    assert help_of(EvalConfig(), "seed") == help_of(EvalConfig, "seed")
    with pytest.raises(KeyError, match="Budgets has no field 'turns'"):
        help_of(Budgets, "turns")

