"""Trajectory records in agent.loop.trajectory's format (version 1), written out for the trainer's data tests: a
run's conversation with the agent's real prompt and tool schemas, its tool calls and results, its outcome."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.loop import runner as loop
from agent.export.dataset import save
from agent.loop.trajectory import TRAJECTORY_VERSION

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ROW_SUM = (EXAMPLES / "row_sum.py").read_text()
CANDIDATE = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.sum(-1)\n"


def record(calls: list[tuple[str, Any, str]], *, final_reward: float = 2.0, speedup: float | None = 1.3,
           problem: str = ROW_SUM, status: str = "submitted") -> dict[str, Any]:
    """A run that made `calls` ((tool, arguments, result) each, arguments a dict or raw text) one per turn."""
    state = loop.start(problem, device="cpu")
    messages = list(state.messages)
    for turn, (name, arguments, result) in enumerate(calls):
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        messages.append({"role": "assistant", "content": f"Turn {turn}.",
                         "tool_calls": [{"id": f"call_{turn}", "type": "function",
                                         "function": {"name": name, "arguments": raw}}]})
        messages.append({"role": "tool", "tool_call_id": f"call_{turn}", "content": result})
    accepted = final_reward > 0
    return {"version": TRAJECTORY_VERSION, "policy": "scripted", "device": "cpu", "problem_source": problem,
            "messages": messages, "tools": state.tools, "turn_rewards": [final_reward] * len(calls),
            "turn_statuses": [["accepted" if accepted else "incorrect"]] * len(calls), "final_reward": final_reward,
            "best_turn": 0 if accepted else None, "best_source": CANDIDATE if accepted else None,
            "best_speedup_vs_eager": speedup if accepted else None,
            "best_speedup_vs_compile": speedup if accepted else None, "status": status, "stop_reason": "",
            "turns": len(calls), "prompt_tokens": 100, "completion_tokens": 50, "wall_seconds": 1.0,
            "gpu_seconds": 0.5}


def good(speedup: float = 1.3) -> dict[str, Any]:
    return record([("write_candidate", {"source": CANDIDATE}, "status: accepted (reached stage done)"),
                   ("submit", {"candidate": "best"}, "submitted the best accepted candidate")], speedup=speedup)


def failed() -> dict[str, Any]:
    return record([("write_candidate", {"source": CANDIDATE}, "status: incorrect (reached stage verify)")],
                  final_reward=-1.0, status="stopped")


def write_data(directory: Path, records: list[dict[str, Any]], problems: list[tuple[str, str]] = ()) -> Path:
    """A DATA_DIR: trajectories/ (agent.export.dataset.save) and, with `problems` ((name, source) pairs), problems.jsonl."""
    directory.mkdir(parents=True, exist_ok=True)
    if records:
        save(records, directory / "trajectories")
    if problems:
        (directory / "problems.jsonl").write_text(
            "".join(json.dumps({"name": n, "source": s, "device": "cpu"}) + "\n" for n, s in problems))
    return directory
