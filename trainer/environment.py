"""The agent's workplace inside a GRPO rollout (stage (d)): TRL's GRPOTrainer `environment_factory`.

TRL creates one environment per rollout, calls reset() with the dataset row, offers the environment's public
methods to the model as tools (their schemas come from the signatures and docstrings, which we write from the
agent's own tool schemas, so the model sees the tools it will have at inference), runs the calls the model
makes, appends the results to the conversation with their tokens masked out of the loss, and asks
get_reward() once the rollout ends.

Every call goes through the agent's real Toolbox and loop state machine (agent.loop.runner.act), on the real
evaluation engine in its sandbox: the same observations, best/latest bookkeeping, submit rules and reward as a
studio run. Each tool call counts as one turn of the agent's budget.
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.loop import runner as loop
from agent.loop import AgentState, Budgets, TurnRecord
from agent.loop import ToolCall
from agent.loop import Toolbox, tool_schemas
from agent.loop import final_reward

# How much of a call's arguments and result the tool log keeps.
_LOG_CHARS = 600


class ToolLog:
    """Appends one JSON line per tool call a rollout made (tool, arguments, verdict status, seconds, observation head)
    to a file: what the policy did with the tools during training, for people and tests to read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.step = 0
        """The trainer's current optimizer step (a callback keeps it up to date)."""
        self._lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        line = json.dumps({"step": self.step, **entry}) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)


class KernelEnvironment:
    """One rollout's run of the agent on one problem. `toolbox_for(device)` lends the shared Toolbox (one warm
    sandbox for every rollout); `max_turns` is the run's turn budget."""

    def __init__(self, toolbox_for: Callable[[str], Toolbox], max_turns: int, tool_log: ToolLog | None = None) -> None:
        self._toolbox_for = toolbox_for
        self._budgets = Budgets(max_turns=max_turns)
        self._log = tool_log
        self.state: AgentState | None = None

    def reset(self, problem_source: str, device: str, **_: Any) -> None:
        """A fresh run on the row's problem. The prompt is already the agent's opening (the dataset's `prompt`)."""
        self.state = loop.start(problem_source, device=device)

    def get_reward(self) -> float:
        """The run's outcome, as the studio records it: the reward of its best accepted candidate, -1 without one."""
        assert self.state is not None, "get_reward() before reset()"
        return final_reward(self.state)

    # The tools: their docstrings are written from the agent's schemas below the class.

    def write_candidate(self, source: str) -> str:
        return self._call("write_candidate", {"source": source})

    def benchmark(self, candidate: str = "best") -> str:
        return self._call("benchmark", {"candidate": candidate})

    def profile(self, candidate: str = "best") -> str:
        return self._call("profile", {"candidate": candidate})

    def read_skill(self, name: str) -> str:
        return self._call("read_skill", {"name": name})

    def search_knowledge(self, query: str) -> str:
        return self._call("search_knowledge", {"query": query})

    def submit(self, candidate: str = "best") -> str:
        return self._call("submit", {"candidate": candidate})

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one call as one agent turn: TRL generated the model's turn (think()'s half), so we open the turn
        with the call pending and let the loop's act() run it, which records verdicts, best and latest, and
        closes the run when the budget is spent or the model submitted."""
        state = self.state
        assert state is not None, "a tool was called before reset()"
        if state.done:
            content = f"not run: the run is over ({state.stop_reason})"
            self._write(name, arguments, None, content)
            return content
        started = time.monotonic()
        call = ToolCall(id=f"call_{state.turn}", name=name, arguments=json.dumps(arguments))
        state.open_turn = TurnRecord(turn=state.turn, tools=[name], verdicts=[], reward=0.0, prompt_tokens=0,
                                     completion_tokens=0, seconds=0.0)
        state.pending = [dataclasses.asdict(call)]
        outcome = loop.act(state, self._toolbox_for(state.device), self._budgets)
        content = state.messages[-1]["content"]
        status = outcome.verdict.status.value if outcome is not None and outcome.verdict is not None else None
        self._write(name, arguments, status, content, time.monotonic() - started)
        return content

    def _write(self, name: str, arguments: dict[str, Any], status: str | None, content: str,
               seconds: float = 0.0) -> None:
        if self._log is not None:
            self._log.write({"tool": name, "arguments": json.dumps(arguments)[:_LOG_CHARS], "status": status,
                             "seconds": round(seconds, 3), "observation": content[:_LOG_CHARS]})


def _docstring(schema: dict[str, Any]) -> str:
    """A Google-style docstring that transformers' get_json_schema turns back into `schema` (description,
    argument descriptions, enums as `(choices: [...])`)."""
    function = schema["function"]
    lines = [function["description"]]
    properties = function["parameters"]["properties"]
    if properties:
        lines += ["", "Args:"]
        for argument, spec in properties.items():
            choices = f" (choices: {json.dumps(spec['enum'])})" if "enum" in spec else ""
            lines.append(f"    {argument}: {spec['description']}{choices}")
    return "\n".join(lines) + "\n"


for _schema in tool_schemas():
    getattr(KernelEnvironment, _schema["function"]["name"]).__doc__ = _docstring(_schema)
