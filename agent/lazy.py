"""A package's public face that imports nothing until a name is used (PEP 562).

The studio's web process reads verdicts and agent states but must never import the evaluation engine, torch or a
model library just to name them; a face of eager imports would pull all of them in with the first `from agent.engine
import Status`. Each face maps a public name to the module that defines it; the module is imported on first use.

    __getattr__, __dir__ = public_face(__name__, {"agent.engine.verdict": "Status Verdict", ...})
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def public_face(package: str, modules: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module-level __getattr__ and __dir__ of `package`, whose public names are `modules`' space-separated
    names, each defined in the module it is listed under."""
    where = {name: module for module, names in modules.items() for name in names.split()}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(where)

    return __getattr__, __dir__
