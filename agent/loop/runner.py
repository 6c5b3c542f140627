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
from typing import Any

from agent.engine.evaluate import ProblemError
from agent.loop.prompts import DEFAULT_INSTRUCTION, system_prompt
from agent.loop.policies.base import Policy, PolicyError, PolicyTurn, ToolCall
from agent.loop.tools import Toolbox, ToolOutcome, list_skills, tool_schemas, verdict_summary
from agent.engine.validation import validate_problem
from agent.loop.state import (CANCELLED, FAILED, RUNNING, SPEEDUP_MARGIN, STATE_VERSION, STOPPED, SUBMITTED, AgentState,
                         Budgets, TurnRecord, cancel, fail, reward, stop)
from agent.engine.verdict import Status, Verdict

# The state's names stay reachable as loop.X: the loop is the agent's one entry point.
__all__ = ["CANCELLED", "FAILED", "RUNNING", "SPEEDUP_MARGIN", "STATE_VERSION", "STOPPED", "SUBMITTED", "AgentState", "Budgets",
           "TurnRecord", "act", "cancel", "exhausted", "fail", "reward", "run", "start", "step", "system_prompt", "think"]

NO_TOOL_CALL = ("You did not call a tool. Every turn must call one: write_candidate to try a kernel, benchmark or "
                "profile to measure one, read_skill or search_knowledge to learn, submit when done.")


def start(problem_source: str, toolbox: Toolbox | None = None, instructions: str = "",
          device: str | None = None) -> AgentState:
    """A fresh run on one problem: the system prompt, the first user message, the tools. The device
    comes from `toolbox`, or from `device` where no toolbox exists yet (the studio starts a run on a
    worker that only talks to the model). Raises ProblemError for a problem that is not in
    KernelBench's format (nothing a model could fix)."""
    device = device or (toolbox.device if toolbox is not None else None)
    if device not in DEVICES:
        raise ValueError(f"start() needs a toolbox or device 'cpu' or 'cuda', not {device!r}")
    report = validate_problem(problem_source)
    if not report.ok:
        raise ProblemError("the problem is invalid: " + "; ".join(i.message for i in report.errors()))
    messages = [{"role": "system", "content": system_prompt(problem_source, device, list_skills())},
                {"role": "user", "content": instructions or DEFAULT_INSTRUCTION}]
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
        return stop(state, STOPPED, reason)
    started = time.monotonic()
    state.policy = policy.name
    try:
        turn = policy.respond(state.messages, state.tools, on_text)
    except PolicyError as exc:
        state.wall_seconds += time.monotonic() - started
        return stop(state, FAILED, f"policy error: {exc}")
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
        stop(state, FAILED, f"the problem failed: {exc}")
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
            stop(state, STOPPED, reason)


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
        if outcome.verdict.status is Status.CAPACITY:
            # No candidate can change the problem's size: the run ends on the engine's limit, not the model's.
            stop(state, FAILED, f"the engine's limit, not the kernel's: {outcome.verdict.message}")
    if outcome.submitted:
        # Turns are counted from 1 in every text a person reads (the run page's "turn 1 · write_candidate"); the state
        # keeps its 0-based index.
        stop(state, SUBMITTED, f"submitted the candidate of turn {state.best['turn'] + 1}")
    return outcome


def _observe(state: AgentState, verdict: Verdict, source: str, record: TurnRecord) -> None:
    summary = verdict_summary(verdict)
    record.verdicts.append(summary)
    record.reward = reward(summary)
    state.gpu_seconds += verdict.device_seconds()
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


DEVICES = ("cpu", "cuda")  # the devices a run can be on (agent/loop/prompts/device_*.md say what each offers)
