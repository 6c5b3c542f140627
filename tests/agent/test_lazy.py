"""The layers' public faces (agent/lazy.py): every name resolves to its module's object, none hides a submodule,
and naming a verdict or a state does not load torch (the studio's web process never imports the engine)."""
from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys

import pytest

FACES = ("agent.engine", "agent.loop", "agent.knowledge", "agent.export")


@pytest.mark.parametrize("package", FACES)
def test_every_public_name_is_the_object_its_module_defines(package: str) -> None:
    face = importlib.import_module(package)
    assert dir(face), f"{package} shows no public names"
    for name in dir(face):
        assert importlib.util.find_spec(f"{package}.{name}") is None, (
            f"{package}.{name} is also a submodule: once imported, the package attribute is the module, not the name")
        assert getattr(face, name) is not None


def test_an_unknown_name_says_which_package_lacks_it() -> None:
    with pytest.raises(AttributeError, match="'agent.engine' has no attribute 'Nope'"):
        importlib.import_module("agent.engine").Nope


def test_naming_a_verdict_and_a_state_does_not_import_torch() -> None:
    code = ("import sys\nfrom agent.engine import Status, Verdict, ProblemNames\nfrom agent.loop import AgentState\n"
            "from agent.knowledge import best_of_speedup\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
