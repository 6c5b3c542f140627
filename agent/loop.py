"""The agent loop: a resumable state machine, one model turn (plus the tool calls it made) per step.

    state = start(problem_source, toolbox)
    while not state.done:
        state = step(state, policy, toolbox, budgets)     # the studio runs each step as a Celery task

AgentState is plain JSON (to_dict / from_dict): a worker that dies between steps loses nothing, and
the next one continues from the stored state. Error policy (smolagents): our bugs raise; the model's
mistakes (bad tool calls, kernels that do not build or are wrong, a turn with no tool call) become
observations it reads on its next turn. A broken problem or a policy that cannot answer ends the
run as "failed" with the reason.
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.evaluate import ProblemError
from agent.policies.base import Policy, PolicyError, PolicyTurn, ToolCall
from agent.tools import Toolbox, ToolOutcome, list_skills, tool_schemas, verdict_summary
from agent.validation import validate_problem
from agent.verdict import Status, Verdict

STATE_VERSION = 1

# A candidate must beat a baseline by this factor to earn that baseline's milestone (CUDA Agent: 5%).
SPEEDUP_MARGIN = 1.05

RUNNING, SUBMITTED, STOPPED, CANCELLED, FAILED = "running", "submitted", "stopped", "cancelled", "failed"

NO_TOOL_CALL = ("You did not call a tool. Every turn must call one: write_candidate to try a kernel, benchmark or "
                "profile to measure one, read_skill or search_knowledge to learn, submit when done.")


@dataclass
class Budgets:
    max_turns: int = 30
    """Model turns before the run stops (each turn may make several tool calls)."""
    max_tokens: int | None = None
    """Prompt plus completion tokens over the whole run; None: no limit."""
    max_wall_seconds: float | None = None
    """Seconds spent inside steps (model calls and tools), summed over the run; None: no limit."""
    max_gpu_seconds: float | None = None
    """Seconds evaluation jobs held the device (the CPU on a CPU run); None: no limit."""

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


def start(problem_source: str, toolbox: Toolbox | None = None, instructions: str = "",
          device: str | None = None) -> AgentState:
    """A fresh run on one problem: the system prompt, the first user message, the tools. The device
    comes from `toolbox`, or from `device` where no toolbox exists yet (the studio starts a run on a
    worker that only talks to the model). Raises ProblemError for a problem that is not in
    KernelBench's format (nothing a model could fix)."""
    device = device or (toolbox.device if toolbox is not None else None)
    if device not in _BACKENDS:
        raise ValueError(f"start() needs a toolbox or device 'cpu' or 'cuda', not {device!r}")
    report = validate_problem(problem_source)
    if not report.ok:
        raise ProblemError("the problem is invalid: " + "; ".join(i.message for i in report.errors()))
    messages = [{"role": "system", "content": system_prompt(problem_source, device, list_skills())},
                {"role": "user", "content": instructions or
                 "Write a faster ModelNew for the problem above. Start with a correct kernel, then make it fast."}]
    return AgentState(problem_source=problem_source, device=device, messages=messages, tools=tool_schemas())


def step(state: AgentState, policy: Policy, toolbox: Toolbox, budgets: Budgets,
         on_text: Callable[[str], None] | None = None) -> AgentState:
    """One model turn and the tool calls it made. Mutates and returns `state`."""
    think(state, policy, budgets, on_text)
    while state.pending:
        act(state, toolbox, budgets)
    return state


def think(state: AgentState, policy: Policy, budgets: Budgets,
          on_text: Callable[[str], None] | None = None) -> AgentState:
    """The model's half of a turn: ask the policy, record its message, queue its tool calls in
    `state.pending` for act(). The studio runs this on the agent queue (I/O bound) and each act() on
    a GPU worker, so a slow model never holds a GPU."""
    if state.done:
        return state
    if state.pending:
        raise RuntimeError("think() called with tool calls still pending; run act() until state.pending is empty")
    reason = exhausted(state, budgets)
    if reason:
        return _stop(state, STOPPED, reason)
    started = time.monotonic()
    state.policy = policy.name
    try:
        turn = policy.respond(state.messages, state.tools, on_text)
    except PolicyError as exc:
        state.wall_seconds += time.monotonic() - started
        return _stop(state, FAILED, f"policy error: {exc}")
    prompt_tokens, completion_tokens = _tokens(state, turn)
    state.prompt_tokens += prompt_tokens
    state.completion_tokens += completion_tokens
    state.messages.append(turn.as_message())
    state.open_turn = TurnRecord(turn=state.turn, tools=[c.name for c in turn.tool_calls], verdicts=[], reward=0.0,
                                 prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                 seconds=time.monotonic() - started)
    state.pending = [dataclasses.asdict(c) for c in turn.tool_calls]
    if not turn.tool_calls:
        state.messages.append({"role": "user", "content": NO_TOOL_CALL})
        _close_turn(state, budgets)
    return state


def act(state: AgentState, toolbox: Toolbox, budgets: Budgets) -> ToolOutcome | None:
    """Run the open turn's next pending tool call; close the turn after its last one. Returns the
    call's outcome (None when nothing was pending). Mutates `state`."""
    if not state.pending:
        return None
    assert state.open_turn is not None, "pending tool calls without an open turn"
    started = time.monotonic()
    call = ToolCall(**state.pending.pop(0))
    outcome: ToolOutcome | None = None
    try:
        outcome = _run_tool(state, toolbox, call, state.open_turn)
    except ProblemError as exc:
        # The problem's own code failed: nothing the model can fix.
        _stop(state, FAILED, f"the problem failed: {exc}")
        # Answer the remaining calls too, so the conversation stays well-formed.
        for rest in [call] + [ToolCall(**c) for c in state.pending]:
            state.messages.append({"role": "tool", "tool_call_id": rest.id, "content": "not run: the problem failed"})
        state.pending = []
    state.open_turn.seconds += time.monotonic() - started
    if not state.pending:
        _close_turn(state, budgets)
    return outcome


def _close_turn(state: AgentState, budgets: Budgets) -> None:
    record = state.open_turn
    assert record is not None
    state.turns.append(record)
    state.open_turn = None
    state.turn += 1
    state.wall_seconds += record.seconds
    if not state.done:
        reason = exhausted(state, budgets)
        if reason:
            _stop(state, STOPPED, reason)


def run(state: AgentState, policy: Policy, toolbox: Toolbox, budgets: Budgets,
        cancelled: Callable[[], bool] = lambda: False,
        on_text: Callable[[str], None] | None = None,
        on_step: Callable[[AgentState], None] | None = None) -> AgentState:
    """Step until the run is over. `cancelled` is checked between steps; `on_step` sees each new state
    (to persist it, or to show progress)."""
    while not state.done:
        if cancelled():
            return cancel(state)
        state = step(state, policy, toolbox, budgets, on_text)
        if on_step is not None:
            on_step(state)
    return state


def fail(state: AgentState, reason: str) -> AgentState:
    """End the run as failed for a reason outside the model's control (e.g. its endpoint is misconfigured)."""
    return state if state.done else _stop(state, FAILED, reason)


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
    return _stop(state, CANCELLED, reason)


def exhausted(state: AgentState, budgets: Budgets) -> str:
    """Which budget is spent, in words; empty while the run may go on."""
    if state.turn >= budgets.max_turns:
        return f"turn budget spent ({state.turn} of {budgets.max_turns} turns)"
    if budgets.max_tokens is not None and state.tokens >= budgets.max_tokens:
        return f"token budget spent ({state.tokens} of {budgets.max_tokens} tokens)"
    if budgets.max_wall_seconds is not None and state.wall_seconds >= budgets.max_wall_seconds:
        return f"wall-clock budget spent ({state.wall_seconds:.0f} of {budgets.max_wall_seconds:g} s)"
    if budgets.max_gpu_seconds is not None and state.gpu_seconds >= budgets.max_gpu_seconds:
        return f"device budget spent ({state.gpu_seconds:.0f} of {budgets.max_gpu_seconds:g} s)"
    return ""


def reward(summary: dict[str, Any] | None) -> float:
    """Correctness-gated reward of one evaluation (CUDA Agent): -1 not accepted, 1 accepted, 2 beats
    eager by the margin, 3 beats eager and torch.compile by the margin. 0 when nothing was evaluated."""
    if summary is None:
        return 0.0
    if summary["status"] != Status.ACCEPTED.value:
        return -1.0
    eager, compiled = summary.get("speedup_vs_eager"), summary.get("speedup_vs_compile")
    if eager is None or eager < SPEEDUP_MARGIN:
        return 1.0
    if compiled is not None and compiled >= SPEEDUP_MARGIN:
        return 3.0
    return 2.0


# ---------------------------------------------------------------------------------- internals

def _run_tool(state: AgentState, toolbox: Toolbox, call: ToolCall, record: TurnRecord) -> ToolOutcome | None:
    if state.done:
        # Every tool call needs an answer in the chat format, even after submit ended the run.
        state.messages.append({"role": "tool", "tool_call_id": call.id, "content": "not run: the run is over"})
        return None
    outcome = toolbox.call(state, call)
    state.messages.append({"role": "tool", "tool_call_id": call.id, "content": outcome.content})
    record.errors += outcome.error
    if outcome.verdict is not None:
        _observe(state, outcome.verdict, outcome.source or "", record)
    if outcome.submitted:
        _stop(state, SUBMITTED, f"submitted the candidate of turn {state.best['turn']}")
    return outcome


def _observe(state: AgentState, verdict: Verdict, source: str, record: TurnRecord) -> None:
    summary = verdict_summary(verdict)
    record.verdicts.append(summary)
    record.reward = reward(summary)
    state.gpu_seconds += sum(verdict.seconds.get(k, 0.0) for k in ("candidate", "reference", "profile"))
    state.latest = {"turn": state.turn, "source": source, "status": summary["status"], "message": summary["message"],
                    "summary": summary}
    if not verdict.accepted:
        return
    best = state.best
    if best is not None and best["source"] == source:
        # A re-measurement of the best: the newest figures stand.
        state.best = dict(best, summary=summary, verdict=verdict.to_dict())
    elif best is None or _speed(summary) > _speed(best["summary"]):
        state.best = {"turn": state.turn, "source": source, "summary": summary, "verdict": verdict.to_dict()}


def _speed(summary: dict[str, Any]) -> float:
    return summary["speedup_vs_eager"] or 0.0


def _tokens(state: AgentState, turn: PolicyTurn) -> tuple[int, int]:
    """The endpoint's counts; a rough estimate (4 characters a token) where it reported none."""
    prompt = turn.prompt_tokens
    if prompt is None:
        prompt = len(json.dumps(state.messages)) // 4
    completion = turn.completion_tokens
    if completion is None:
        completion = (len(turn.text) + sum(len(c.name) + len(c.arguments) for c in turn.tool_calls)) // 4
    return prompt, completion


def _stop(state: AgentState, status: str, reason: str) -> AgentState:
    state.status, state.stop_reason = status, reason
    return state


# ---------------------------------------------------------------------------------- the prompt

_BACKENDS = {
    "cpu": ("This run is on the CPU. Write C++ compiled with torch.utils.cpp_extension.load_inline(name=..., "
            "cpp_sources=SOURCE, functions=[...], extra_cflags=['-O3', '-fopenmp'], extra_ldflags=['-fopenmp']) "
            "(backend `cpp`): OpenMP threads and SIMD-friendly loops are your tools."),
    "cuda": ("This run is on an NVIDIA GPU. Backends: CUDA C++ through torch.utils.cpp_extension.load_inline("
             "cpp_sources=DECLARATIONS, cuda_sources=KERNELS, functions=[...]) (`cuda`); raw CUDA kernels compiled "
             "with NVRTC through torch.cuda._compile_kernel (`nvrtc`, builds in well under a second); or Triton "
             "(`triton`, @triton.jit kernels)."),
}


def system_prompt(problem_source: str, device: str, skills: list[str]) -> str:
    skills_line = f"Skill documents you can read with read_skill: {', '.join(skills)}.\n" if skills else ""
    return f"""You are a performance engineer who writes fast, correct kernels for PyTorch modules.

The problem is a Python module in KernelBench's format: class Model(nn.Module), get_inputs() and
get_init_inputs(). Your job: write a candidate module that defines class ModelNew(nn.Module), with the
same constructor arguments and forward signature as Model, computing the same outputs faster with your
own kernels. Parameters with the same names and shapes as Model's get Model's weights.

{_BACKENDS[device]}

How candidates are judged: every candidate is built, then checked against Model on several fresh
inputs (including mixed-sign, very large and very small values) within dtype-aware tolerances, then
timed against PyTorch eager and torch.compile. Only matrix multiplication and convolution may be left
to PyTorch; other PyTorch compute ops in forward are flagged. Inputs must not be modified, outputs
must be fresh tensors, all work must finish before forward returns, and results must depend only on
the inputs' values. Gaming the measurement gets a candidate rejected.

Work like an engineer: think about where the time goes, write a correct kernel first, measure, read
the profile, then improve it step by step. Each turn, call tools:
- write_candidate(source): the whole module; returns the verdict (status, errors, timings, speedups).
- benchmark(candidate), profile(candidate): re-time or profile the 'best' or 'latest' candidate.
- read_skill(name), search_knowledge(query): guidance and past experience.
- submit(candidate): end the run with your best accepted candidate (only accepted ones count).
{skills_line}
The problem:
```python
{problem_source.rstrip()}
```"""
