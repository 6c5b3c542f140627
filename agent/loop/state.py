"""The agent run's resumable state: plain JSON (to_dict / from_dict) that a worker stores between steps, with the
transitions that need no model and no engine (stop, fail, cancel) and the reward of one evaluation. Light on purpose:
the studio reads and ends runs with it in a process that never imports the evaluation engine."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from agent.engine.verdict import Status, Verdict

STATE_VERSION = 1

# A candidate must beat a baseline by this factor to earn that baseline's milestone (CUDA Agent: 5%).
SPEEDUP_MARGIN = 1.05

RUNNING, SUBMITTED, STOPPED, CANCELLED, FAILED = "running", "submitted", "stopped", "cancelled", "failed"


@dataclass
class Budgets:
    max_turns: int = field(default=30, metadata={
        "help": "Model turns before the run stops (each turn may make several tool calls)."})
    max_tokens: int | None = field(default=None, metadata={
        "help": "Prompt plus completion tokens over the whole run; None: no limit."})
    max_wall_seconds: float | None = field(default=None, metadata={
        "help": "Seconds spent inside steps (model calls and tools), summed over the run; None: no limit."})
    max_gpu_seconds: float | None = field(default=None, metadata={
        "help": "Seconds evaluation jobs held the device (the CPU on a CPU run); None: no limit."})

    def __post_init__(self) -> None:
        if self.max_turns < 1:
            raise ValueError("Budgets.max_turns must be at least 1")
        for name in ("max_tokens", "max_wall_seconds", "max_gpu_seconds"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"Budgets.{name} must be positive, or None for no limit")


@dataclass
class TurnRecord:
    turn: int
    tools: list[str]
    """The tools called this turn, in order."""
    verdicts: list[dict[str, Any]]
    """verdict_summary() of each evaluation this turn ran."""
    reward: float
    """reward() of the turn's last evaluation; 0 for a turn that evaluated nothing."""
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    errors: int = 0
    """Tool calls the model got wrong this turn (malformed, unknown, refused)."""


@dataclass
class AgentState:
    problem_source: str
    device: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    """The tool schemas the model sees, fixed at the start so a resumed run offers the same tools."""
    policy: str = ""
    turn: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_seconds: float = 0.0
    gpu_seconds: float = 0.0
    latest: dict[str, Any] | None = None
    """The last evaluated candidate: {turn, source, status, message, summary}."""
    best: dict[str, Any] | None = None
    """The fastest accepted candidate: {turn, source, summary, verdict (the whole verdict)}."""
    turns: list[TurnRecord] = field(default_factory=list)
    pending: list[dict[str, str]] = field(default_factory=list)
    """Tool calls of the open turn not yet run ({id, name, arguments}): think() fills it, act() drains it."""
    open_turn: TurnRecord | None = None
    """The turn in progress between think() and its last act()."""
    status: str = RUNNING
    stop_reason: str = ""
    version: int = STATE_VERSION

    @property
    def done(self) -> bool:
        return self.status != RUNNING

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def best_verdict(self) -> Verdict | None:
        return Verdict.from_dict(self.best["verdict"]) if self.best else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentState:
        data = dict(data)
        if data.get("version") != STATE_VERSION:
            raise ValueError(f"agent state version {data.get('version')!r} is not {STATE_VERSION}")
        data["turns"] = [TurnRecord(**t) for t in data.get("turns", [])]
        if data.get("open_turn") is not None:
            data["open_turn"] = TurnRecord(**data["open_turn"])
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> AgentState:
        return cls.from_dict(json.loads(text))


def fail(state: AgentState, reason: str) -> AgentState:
    """End the run as failed for a reason outside the model's control (e.g. its endpoint is misconfigured)."""
    return state if state.done else stop(state, FAILED, reason)


def cancel(state: AgentState, reason: str = "cancelled by the user") -> AgentState:
    if state.done:
        return state
    # A turn cut between think() and act(): answer its calls so the conversation stays well-formed.
    for pending in state.pending:
        state.messages.append({"role": "tool", "tool_call_id": pending["id"], "content": "not run: the run was cancelled"})
    state.pending = []
    if state.open_turn is not None:
        state.turns.append(state.open_turn)
        state.open_turn = None
        state.turn += 1
    return stop(state, CANCELLED, reason)


def stop(state: AgentState, status: str, reason: str) -> AgentState:
    state.status, state.stop_reason = status, reason
    return state



def reward(summary: dict[str, Any] | None) -> float:
    """Correctness-gated reward of one evaluation (CUDA Agent): -1 not accepted, 1 accepted, 2 beats
    eager by the margin, 3 beats eager and torch.compile by the margin. 0 when nothing was evaluated, for a
    capacity verdict (the engine's limit, never the candidate's failure), and for an accepted one on a constant
    reference (writing the constant passes and is the fastest "kernel": a policy must not learn to). An accepted
    verdict flagged noisy_timing earns 1 however fast it read: its speed is not established (the interval stayed wide,
    or the device was busy with other work during the baselines' batches, which leftover GPU work of the candidate's
    own can cause), and what is never a headline must not be a reward either."""
    if summary is None or summary["status"] == Status.CAPACITY.value:
        return 0.0  # the engine's limit (the problem against the device): no evidence about the candidate either way
    if summary["status"] != Status.ACCEPTED.value:
        return -1.0
    flags = summary.get("flags") or []
    if "constant_reference" in flags:
        return 0.0
    if "noisy_timing" in flags:
        return 1.0
    eager, compiled = summary.get("speedup_vs_eager"), summary.get("speedup_vs_compile")
    if eager is None or eager < SPEEDUP_MARGIN:
        return 1.0
    if compiled is not None and compiled >= SPEEDUP_MARGIN:
        return 3.0
    return 2.0
