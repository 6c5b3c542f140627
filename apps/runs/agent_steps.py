"""The agent run's two steps, driven by apps/runs/steps.py like every other stage:

  think (agent queue): one model turn; its text streams out as batched "token" events; its tool calls
                       are queued in the stored AgentState.
  act   (gpu queue):   one queued tool call (build, verify, time, profile, read a skill, search the
                       knowledge base, submit).

Each step loads the AgentState from the run's row, advances it, and returns it; the commit stores it
only if the step's claim still holds. A worker killed mid-step loses that step's work alone: the
next worker repeats it from the stored state. The model is never called on a GPU worker and a
kernel never runs on an agent worker.
"""
from __future__ import annotations

import time
from typing import Any


from agent.builtin.trace import trace_graph
from agent.engine import ProblemError
from agent.loop import DEFAULT_INSTRUCTION, PolicyError, Toolbox
from agent.loop import runner as loop
from apps.endpoints import policies
from apps.knowledge.services import opening_note, search_function
from apps.problems.services import sha256
from apps.runs import engine
from apps.runs.events import append_event, phase_watcher
from apps.runs.models import Candidate, Run
from apps.runs.stored_verdict import StoredVerdict
from apps.runs.verdicts import emit_verdict, fail, finish_agent_run
from studio.storable import storable_text

# Tokens are pushed in batches: often enough to read as a stream, rarely enough not to flood the
# database with one row per token (DESIGN §6: "tens of ms").
TOKEN_FLUSH_SECONDS = 0.05
TOKEN_FLUSH_CHARS = 2000
# What the run page shows of a tool call's arguments and result (the model sees the result whole).
SHOWN_CHARS = 20000


class TokenBatcher:
    """Collects streamed text and stores it as "token" events, one per batch."""

    def __init__(self, run_id: int, turn: int, attempt: int) -> None:
        self.run_id, self.turn, self.attempt = run_id, turn, attempt
        self.buffer: list[str] = []
        self.size = 0
        self.last_flush = time.monotonic()

    def feed(self, text: str) -> None:
        self.buffer.append(text)
        self.size += len(text)
        if self.size >= TOKEN_FLUSH_CHARS or time.monotonic() - self.last_flush >= TOKEN_FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            # `attempt` lets a page drop the partial text of an attempt a dead worker abandoned.
            append_event(self.run_id, "token", {"turn": self.turn, "attempt": self.attempt, "text": "".join(self.buffer)})
            self.buffer, self.size = [], 0
        self.last_flush = time.monotonic()


def budgets_of(run: Run) -> loop.Budgets:
    b = run.budgets
    return loop.Budgets(max_turns=int(b.get("turns", 10)), max_tokens=b.get("tokens"),
                        max_wall_seconds=b.get("agent_wall_seconds"), max_gpu_seconds=b.get("gpu_seconds"))


def _knowledge_note(run: Run) -> str:
    return opening_note(run.owner, run.problem.source, device=run.config.get("device"))


# ---------------------------------------------------------------------------------------- think

def work_think(run: Run, _candidate: Candidate | None) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if run.agent_state is None:
        note = _knowledge_note(run)
        instructions = run.config.get("instructions") or ""
        user_message = "\n\n".join(part for part in (
            instructions or DEFAULT_INSTRUCTION,
            f"Notes from earlier runs on similar problems (measured; use what applies):\n{note}" if note else "") if part)
        try:
            state = loop.start(run.problem.source, instructions=user_message, device=run.config.get("device", "cpu"))
        except ProblemError as exc:
            return {"problem_error": str(exc)}
        result["started"] = {"knowledge": note}
    else:
        state = loop.AgentState.from_dict(run.agent_state)
    budgets = budgets_of(run)
    try:
        policy = None
        if run.endpoint is not None:
            # The built-in policy traces the problem in this worker's sandbox (CPU, meta tensors).
            policy = policies.policy_for(run.endpoint, run.problem.source, lambda source: trace_graph(engine.evaluator(), source),
                                device=run.config.get("device", "cpu"))
        if policy is None:
            raise PolicyError("the run has no model endpoint (it was deleted?); start a new run with another model")
    except PolicyError as exc:
        loop.fail(state, f"policy error: {exc}")
        return {**result, "state": state.to_dict()}
    batcher = TokenBatcher(run.pk, state.turn, run.step_attempts)
    before = len(state.messages)
    try:
        loop.think(state, policy, budgets, on_text=batcher.feed)
    finally:
        batcher.flush()
        policy.close()
    return {**result, "state": state.to_dict(), "new_messages": state.messages[before:]}


def apply_think(run: Run, _candidate: Candidate | None, result: dict[str, Any]) -> None:
    if "problem_error" in result:
        fail(run, f"The problem cannot be optimized: {result['problem_error']}")
        return
    state = loop.AgentState.from_dict(result["state"])
    run.agent_state = result["state"]
    if "started" in result:
        append_event(run.pk, "agent_started", {"policy": state.policy or run.config.get("policy", ""),
                                               "tools": [t["function"]["name"] for t in state.tools],
                                               "knowledge": result["started"]["knowledge"], "budgets": run.budgets})
    new = result.get("new_messages") or []
    if new:
        # The turn just taken: the open one, or (no tool call) the one think() already closed.
        record = state.open_turn or state.turns[-1]
        assistant = new[0]
        append_event(run.pk, "assistant", {
            "turn": record.turn, "text": assistant.get("content") or "",
            "tool_calls": [{"id": c["id"], "name": c["function"]["name"], "arguments": _shown(c["function"]["arguments"])}
                           for c in assistant.get("tool_calls", [])],
            "prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens,
            "total_tokens": state.tokens})
        for message in new[1:]:  # what the loop told the model (e.g. "you did not call a tool")
            append_event(run.pk, "observation", {"turn": record.turn, "text": message.get("content", "")})
    _advance(run, state)


# ------------------------------------------------------------------------------------------ act

def work_act(run: Run, _candidate: Candidate | None) -> dict[str, Any]:
    state = loop.AgentState.from_dict(run.agent_state)
    if not state.pending:
        return {"state": state.to_dict(), "call": None}
    call = dict(state.pending[0])
    turn = state.turn
    config = engine.eval_config(run.config, run.budgets)
    knowledge = search_function(run.owner, run.problem.source, device=config.device)
    toolbox = Toolbox(engine.evaluator(), config, knowledge=knowledge, on_phase=phase_watcher(run.pk, turn=turn))
    outcome = loop.act(state, toolbox, budgets_of(run))
    return {"state": state.to_dict(), "call": call, "turn": turn,
            "content": outcome.content if outcome else state.messages[-1].get("content", ""),
            "error": bool(outcome and outcome.error), "source": outcome.source if outcome else None,
            "verdict": outcome.verdict.to_dict() if outcome and outcome.verdict else None}


def apply_act(run: Run, _candidate: Candidate | None, result: dict[str, Any]) -> None:
    state = loop.AgentState.from_dict(result["state"])
    run.agent_state = result["state"]
    call = result.get("call")
    if call is not None:
        append_event(run.pk, "tool_result", {"turn": result["turn"], "id": call["id"], "tool": call["name"],
                                             "content": _shown(result["content"]), "error": result["error"]})
    if result.get("verdict") is not None:
        verdict = StoredVerdict(result["verdict"])
        number = run.candidates.count() + 1
        candidate = Candidate.objects.create(
            run=run, turn=number, source=storable_text(result["source"]), source_hash=sha256(result["source"]),
            backend=verdict.backend, build=verdict.build, verdict=result["verdict"])
        emit_verdict(run, candidate, {"agent_turn": result["turn"], "tool": call["name"] if call else ""})
    _advance(run, state)


# ------------------------------------------------------------------------------------- advancing

def _advance(run: Run, state: loop.AgentState) -> None:
    if state.pending:
        run.stage = Run.Stage.ACT
    elif not state.done:
        run.stage = Run.Stage.THINK
    else:
        finish_agent_run(run, state)


def _shown(text: str) -> str:
    if len(text) <= SHOWN_CHARS:
        return text
    return text[:SHOWN_CHARS] + f"\n... [{len(text) - SHOWN_CHARS} more characters]"

