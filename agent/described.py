"""Settings that say what they mean: every field of a config dataclass (EvalConfig, Limits, Budgets, PolicySpec,
trainer/config.py's) carries its help in `metadata["help"]`, and the command line, the studio's forms and the API
show that one wording instead of writing their own.

    help_of(Budgets, "max_turns")   # "Model turns before the run stops (each turn may make several tool calls)."
"""
from __future__ import annotations

import dataclasses
from typing import Any


def help_of(config: Any, name: str) -> str:
    """The help of `config`'s field `name` (a dataclass or an instance); KeyError naming the field when it has none."""
    label = config.__name__ if isinstance(config, type) else type(config).__name__
    found = next((f for f in dataclasses.fields(config) if f.name == name), None)
    if found is None:
        raise KeyError(f"{label} has no field {name!r}")
    if "help" not in found.metadata:
        raise KeyError(f"{label}.{name} has no help")
    return str(found.metadata["help"])
