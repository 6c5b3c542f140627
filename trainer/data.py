"""The stages' datasets, built from the studio's data:

- problems (`problems.jsonl`, one {"name", "source", "device"} object a line) become prompts for the GRPO
  stages, with the columns the reward needs (the problem's source and device);
- trajectories (a dataset directory `agent.export.dataset` saved) become rejection fine-tuning conversations, after
  filters that say how many rows each dropped, and (conversation, outcome) pairs for the critic.

A DATA_DIR holds `trajectories/` and/or `problems.jsonl`; load_inputs() reads whichever are there.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset, load_from_disk

from agent.loop import runner as loop
from agent.loop import TOOL_NAMES
from agent.engine import validate_problem
from trainer.config import DataConfig
from trainer.prompts import single_turn_messages

PROBLEMS_FILE = "problems.jsonl"
TRAJECTORIES_DIR = "trajectories"


class DataError(ValueError):
    """The training data is missing or malformed; the message says which file and what to fix."""


@dataclass
class Problem:
    name: str
    source: str
    device: str


@dataclass
class Inputs:
    """What a DATA_DIR holds."""
    problems: list[Problem] | None = None
    trajectories: Dataset | None = None


@dataclass
class FilterReport:
    """How many trajectories each rejection-fine-tuning filter dropped (a row counts under the first filter
    it fails) and how many were kept."""
    total: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    kept: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"total": self.total, "dropped": dict(self.dropped), "kept": self.kept}

    def __str__(self) -> str:
        drops = ", ".join(f"{count} {reason}" for reason, count in self.dropped.items())
        return f"{self.kept} of {self.total} trajectories kept (dropped: {drops})"


# ------------------------------------------------------------------------------------------- reading

def load_inputs(data_dir: Path | str) -> Inputs:
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"no data directory at {data_dir}; pass a directory holding {TRAJECTORIES_DIR}/ "
                        f"(agent.export.dataset's save_to_disk) and/or {PROBLEMS_FILE}")
    problems_path, trajectories_path = data_dir / PROBLEMS_FILE, data_dir / TRAJECTORIES_DIR
    inputs = Inputs(problems=read_problems(problems_path) if problems_path.exists() else None,
                    trajectories=read_trajectories(trajectories_path) if trajectories_path.exists() else None)
    if inputs.problems is None and inputs.trajectories is None:
        raise DataError(f"{data_dir} holds neither {TRAJECTORIES_DIR}/ nor {PROBLEMS_FILE}; write the studio's "
                        f"exported trajectories or a problems file there")
    return inputs


def read_problems(path: Path) -> list[Problem]:
    """The problems of a JSON lines file; raises DataError naming the line of a bad one."""
    problems: list[Problem] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{where} is not JSON ({exc.msg})") from None
            if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("name", "source", "device")):
                raise DataError(f"{where} must be an object with text fields name, source and device")
            if item["device"] not in ("cpu", "cuda"):
                raise DataError(f"{where}: device must be cpu or cuda, not {item['device']!r}")
            report = validate_problem(item["source"])
            if not report.ok:
                raise DataError(f"{where}: problem {item['name']!r} is not in KernelBench's format: "
                                + "; ".join(i.message for i in report.errors()))
            problems.append(Problem(item["name"], item["source"], item["device"]))
    if not problems:
        raise DataError(f"{path} holds no problems; write one JSON object a line")
    return problems


def read_trajectories(path: Path) -> Dataset:
    try:
        dataset = load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as exc:
        raise DataError(f"{path} is not a dataset directory (write it with agent.export.dataset.save or "
                        f"manage.py export_trajectories): {exc}") from None
    if not isinstance(dataset, Dataset):
        raise DataError(f"{path} holds a DatasetDict; save one split (agent.export.dataset.save writes a Dataset)")
    missing = {"messages", "tools", "final_reward", "best_speedup_vs_eager", "turns"} - set(dataset.column_names)
    if missing:
        raise DataError(f"{path} lacks the columns {sorted(missing)}; export it with agent.export.dataset")
    return dataset


# ------------------------------------------------------------------------------------------- prompts

def single_turn_dataset(problems: list[Problem]) -> Dataset:
    """Stage (a)'s prompts: the problem and the task in one conversation; the reward reads problem_source and
    device from the same row."""
    return Dataset.from_list([{"prompt": single_turn_messages(p.source, p.device), "problem_source": p.source,
                               "device": p.device, "name": p.name} for p in problems])


def multi_turn_dataset(inputs: Inputs) -> Dataset:
    """Stage (d)'s prompts: exactly what the agent sees at the start of a run (its system prompt with the problem,
    its first user message); the environment reads problem_source and device. Problems come from problems.jsonl,
    else from the trajectories' problems (each once, on the device its trajectory ran on)."""
    if inputs.problems is not None:
        problems = [(p.name, p.source, p.device) for p in inputs.problems]
    else:
        assert inputs.trajectories is not None
        seen: dict[str, tuple[str, str, str]] = {}
        for source, device in zip(inputs.trajectories["problem_source"], inputs.trajectories["device"]):
            seen.setdefault(source, (f"problem {len(seen) + 1}", source, device))
        problems = list(seen.values())
    rows = []
    for name, source, device in problems:
        state = loop.start(source, device=device)
        rows.append({"prompt": state.messages, "problem_source": source, "device": device, "name": name})
    return Dataset.from_list(rows)


# ------------------------------------------------------------------------------------------- trajectories

def rft_dataset(trajectories: Dataset, config: DataConfig) -> tuple[Dataset, FilterReport]:
    """Successful trajectories as tool-calling conversations (`messages`, `tools`) for SFTTrainer. Filters, in
    order: not correct (no accepted candidate), too slow (best speedup under config.min_speedup), too long
    (more turns than config.max_turns), malformed tool calls, loops."""
    checks: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
        ("not correct", lambda row: row["final_reward"] is not None and row["final_reward"] > 0),
        ("too slow", lambda row: (row["best_speedup_vs_eager"] or 0.0) >= config.min_speedup),
        ("too many turns", lambda row: config.max_turns is None or row["turns"] <= config.max_turns),
        ("malformed tool calls", lambda row: not malformed_calls(row["messages"])),
        ("loops", lambda row: longest_repeat(row["messages"]) <= config.max_repeated_calls),
    ]
    report = FilterReport(total=len(trajectories), dropped={reason: 0 for reason, _ in checks})
    kept = []
    for index, row in enumerate(trajectories):
        failed = next((reason for reason, passes in checks if not passes(row)), None)
        if failed is None:
            kept.append(index)
        else:
            report.dropped[failed] += 1
    report.kept = len(kept)
    # select() keeps the export's features: tool-call arguments stay JSON values (datasets.Json), not a struct
    # that would give every call every other tool's argument names.
    return trajectories.select(kept).select_columns(["messages", "tools"]), report


def critic_dataset(trajectories: Dataset, render: Callable[[list[dict[str, Any]]], str],
                   config: DataConfig) -> Dataset:
    """(text, target) pairs: a whole trajectory as the policy's chat template renders it (`render`), and its
    outcome (final_reward), for a value model. Successes and failures alike: the critic must tell them apart."""
    rows = [{"text": render([_chat_message(m) for m in row["messages"]]), "target": float(row["final_reward"])}
            for row in trajectories
            if row["final_reward"] is not None and (config.max_turns is None or row["turns"] <= config.max_turns)]
    return Dataset.from_list(rows)


def malformed_calls(messages: list[dict[str, Any]]) -> int:
    """Tool calls the model got wrong: arguments that are not a JSON object, unknown tools, and calls the toolbox
    refused as malformed (its observations start with "error: ")."""
    bad = 0
    for message in messages:
        for call in message.get("tool_calls") or []:
            function = call["function"]
            if function["name"] not in TOOL_NAMES or not isinstance(function["arguments"], dict):
                bad += 1
        if message["role"] == "tool" and (message.get("content") or "").startswith("error: "):
            bad += 1
    return bad


def longest_repeat(messages: list[dict[str, Any]]) -> int:
    """The longest run of identical tool calls (same tool, same arguments) in a row."""
    longest, run, previous = 0, 0, None
    for message in messages:
        for call in message.get("tool_calls") or []:
            key = (call["function"]["name"], json.dumps(call["function"]["arguments"], sort_keys=True))
            run = run + 1 if key == previous else 1
            previous = key
            longest = max(longest, run)
    return longest


def _chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """A message as chat templates take it: tool calls only where there are some, tool_call_id only on tool
    messages (the export's fixed schema carries both on every message)."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [{"type": "function", "id": c.get("id") or "",
                              "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
                             for c in message["tool_calls"]]
    if message["role"] == "tool" and message.get("tool_call_id"):
        out["tool_call_id"] = message["tool_call_id"]
    return out
