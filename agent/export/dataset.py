"""Trajectories as a Hugging Face `datasets` dataset, the trainer's input (DESIGN §8).

One row per run, from agent.loop.trajectory.to_record(). The features are explicit, so every row has the
same schema whatever its conversation held, and the columns follow TRL's conventions for tool calling
(its dataset_formats guide): `messages` in the chat format with `tool_calls`, `tools` as a list of JSON
schemas, and the free-form JSON (tool-call arguments, tool schemas) in `datasets.Json` columns, which
read back as Python objects, as chat templates and TRL's trainers want them. Beside them: the rewards
per turn and for the run, the verdicts, token counts and provenance, for filtering (e.g. SFT on runs
with final_reward >= 2) and for the RL stages.

    dataset = to_dataset(read_jsonl("runs.jsonl"))
    dataset.save_to_disk("runs")          # later: datasets.load_from_disk("runs")
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from datasets import Dataset, Features, Json, List, Value

from agent.loop.trajectory import TRAJECTORY_VERSION

_TOOL_CALL = {"id": Value("string"), "type": Value("string"),
              # The arguments the model wrote: a JSON object for a well-formed call, the raw text where it
              # wrote something that is not JSON (the trajectory keeps its mistakes; they are data too).
              "function": {"name": Value("string"), "arguments": Json()}}

_MESSAGE = {"role": Value("string"),
            "content": Value("string"),
            "tool_calls": List(_TOOL_CALL),          # empty for every message but an assistant's that called tools
            "tool_call_id": Value("string")}         # set on tool messages only

FEATURES = Features({
    "version": Value("int32"),
    "policy": Value("string"),
    "device": Value("string"),
    "problem_source": Value("string"),
    "messages": List(_MESSAGE),
    "tools": List(Json()),
    "turn_rewards": List(Value("float64")),
    "turn_statuses": List(List(Value("string"))),
    "final_reward": Value("float64"),
    "best_turn": Value("int64"),
    "best_source": Value("string"),
    "best_speedup_vs_eager": Value("float64"),
    "best_speedup_vs_compile": Value("float64"),
    "status": Value("string"),
    "stop_reason": Value("string"),
    "turns": Value("int64"),
    "prompt_tokens": Value("int64"),
    "completion_tokens": Value("int64"),
    "wall_seconds": Value("float64"),
    "gpu_seconds": Value("float64"),
})


def to_dataset(records: Iterable[dict[str, Any]]) -> Dataset:
    """One row per trajectory record. Raises ValueError for something that is not such a record."""
    return Dataset.from_list([_row(record, index) for index, record in enumerate(records)], features=FEATURES)


def save(records: Iterable[dict[str, Any]], directory: Path | str) -> Dataset:
    """Write the records as a dataset directory (datasets.load_from_disk reads it back)."""
    dataset = to_dataset(records)
    dataset.save_to_disk(str(directory))
    return dataset


def write_jsonl(records: Iterable[dict[str, Any]], path: Path, append: bool = False) -> int:
    """Write the records as JSON lines, one record a line (appended with `append`). Returns how many."""
    count = 0
    with path.open("a" if append else "w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
            count += 1
    return count


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON lines file; blank lines are skipped. Raises ValueError naming a bad line."""
    records = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path} line {number} is not JSON ({exc.msg})") from None
    return records


def _row(record: dict[str, Any], index: int) -> dict[str, Any]:
    if not isinstance(record, dict) or record.get("version") != TRAJECTORY_VERSION:
        raise ValueError(f"record {index} is not a version {TRAJECTORY_VERSION} trajectory record "
                         f"(agent.loop.trajectory.to_record makes them)")
    missing = [name for name in FEATURES if name not in record]
    if missing:
        raise ValueError(f"trajectory record {index} lacks {', '.join(missing)}")
    row = {name: record[name] for name in FEATURES}
    row["messages"] = [_message(m, index) for m in record["messages"]]
    return row


def _message(message: dict[str, Any], index: int) -> dict[str, Any]:
    """A chat message with every field of the schema; content None (an assistant that only called
    tools, in the OpenAI format) becomes ""."""
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError(f"trajectory record {index} has a {message['role']} message whose content is "
                         f"{type(content).__name__}, not text")
    return {"role": message["role"], "content": content or "",
            "tool_calls": [_tool_call(c) for c in message.get("tool_calls") or []],
            "tool_call_id": message.get("tool_call_id")}


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    return {"id": call.get("id") or "", "type": call.get("type") or "function",
            "function": {"name": function["name"], "arguments": _arguments(function["arguments"])}}


def _arguments(raw: Any) -> Any:
    """The JSON value the arguments' text encodes; the text itself where it does not parse."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw
