"""A policy that replays a fixed script: deterministic tests, and a demo of the real tools with no model.

The script's position is read off the conversation (the number of assistant turns so far), so the
policy keeps no state of its own and a resumed run picks up the script where it stopped.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

from agent.loop.policies.base import PolicyError, PolicyTurn, ToolCall

Messages = list[dict[str, Any]]
ScriptedTurn = Union[PolicyTurn, Callable[[Messages], PolicyTurn]]

CORPUS = Path(__file__).resolve().parents[3] / "tests" / "corpus" / "candidates"


class ScriptedPolicy:
    name = "scripted"

    def __init__(self, turns: list[ScriptedTurn], chunks: int = 3) -> None:
        self.turns = list(turns)
        self.chunks = chunks

    def respond(self, messages: Messages, tools: list[dict[str, Any]],
                on_text: Callable[[str], None] | None = None) -> PolicyTurn:
        index = sum(1 for m in messages if m["role"] == "assistant")
        if index >= len(self.turns):
            raise PolicyError(f"the script has {len(self.turns)} turns and all were played")
        scripted = self.turns[index]
        turn = scripted(messages) if callable(scripted) else scripted
        if on_text is not None and turn.text:
            size = max(1, -(-len(turn.text) // self.chunks))
            for i in range(0, len(turn.text), size):
                on_text(turn.text[i:i + size])
        return turn

    def close(self) -> None:
        """Nothing to release."""


def call(name: str, arguments: dict[str, Any] | str | None = None, id: str = "") -> ToolCall:
    """A tool call; `arguments` as a dict (encoded here) or as raw text (sent as is, malformed or not)."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id or f"call_{name}", name=name, arguments=raw)


def write(source: str, text: str = "") -> PolicyTurn:
    return PolicyTurn(text or "Trying a candidate.", [call("write_candidate", {"source": source})])


def submit(which: str = "best") -> PolicyTurn:
    return PolicyTurn("Submitting.", [call("submit", {"candidate": which})])


def script_of_files(paths: list[Path]) -> list[ScriptedTurn]:
    """Write each candidate file in turn, benchmark the best, submit."""
    turns: list[ScriptedTurn] = [write(p.read_text(), f"Candidate {i + 1}: {p.name}.") for i, p in enumerate(paths)]
    return turns + [PolicyTurn("Re-timing the best candidate.", [call("benchmark", {"candidate": "best"})]), submit()]


def demo_files(device: str) -> list[Path]:
    """The built-in demo for tests/corpus/problems/elementwise_silu_bias.py: a wrong candidate, then a right one."""
    right = "legit_cpp_silu_bias.py" if device == "cpu" else "legit_cuda_silu_bias.py"
    return [CORPUS / "fault_py_wrong_shape.py", CORPUS / right]
