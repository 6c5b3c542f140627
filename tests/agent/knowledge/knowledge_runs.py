"""Finished agent runs built by hand, as agent.loop.runner leaves them, for the knowledge-base tests (engine and studio):
each turn is the assistant's message with its tool calls, the tool results, and a TurnRecord holding the
verdict summary of each evaluation."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.loop.runner import SUBMITTED, AgentState, TurnRecord


@dataclass
class Call:
    tool: str
    arguments: dict[str, Any]
    observation: str
    summary: dict[str, Any] | None = None
    """The verdict summary, for a call that evaluated something."""


@dataclass
class Turn:
    text: str
    calls: list[Call] = field(default_factory=list)


def summary(status: str, eager: float | None = None, compiled: float | None = None, message: str = "",
            flags: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"status": status, "correct": status == "accepted", "message": message or status, "flags": list(flags),
            "candidate_ms": 1.0 if eager is not None else None, "speedup_vs_eager": eager,
            "speedup_vs_compile": compiled}


def write(source: str, result: dict[str, Any]) -> Call:
    return Call("write_candidate", {"source": source}, f"status: {result['status']}\nmessage: {result['message']}", result)


def finished_run(problem_source: str, turns: list[Turn], device: str = "cpu",
                 best: dict[str, Any] | None = None) -> AgentState:
    """`best` is the loop's record of the fastest accepted candidate: {turn, source, summary, verdict}."""
    state = AgentState(problem_source=problem_source, device=device, tools=[], policy="hand-built",
                       messages=[{"role": "system", "content": "system prompt"},
                                 {"role": "user", "content": "make it fast"}])
    for number, turn in enumerate(turns):
        ids = [f"call-{number}-{i}" for i in range(len(turn.calls))]
        state.messages.append({"role": "assistant", "content": turn.text, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": c.tool, "arguments": json.dumps(c.arguments)}}
            for i, c in zip(ids, turn.calls)]})
        state.messages += [{"role": "tool", "tool_call_id": i, "content": c.observation} for i, c in zip(ids, turn.calls)]
        state.turns.append(TurnRecord(turn=number, tools=[c.tool for c in turn.calls],
                                      verdicts=[c.summary for c in turn.calls if c.summary is not None],
                                      reward=0.0, prompt_tokens=0, completion_tokens=0, seconds=0.0))
    state.turn = len(turns)
    state.best = best
    state.status = SUBMITTED
    return state
