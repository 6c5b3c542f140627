"""Trajectories as a `datasets` dataset: real runs round-trip through save_to_disk with their tool calls
and rewards, heterogeneous conversations share one schema, and `python -m agent export` writes one."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from datasets import load_from_disk

from agent.loop import runner as loop
from agent.cli import main as cli_main
from agent.engine.evaluate import Evaluator
from agent.export.dataset import FEATURES, read_jsonl, save, to_dataset, write_jsonl
from agent.loop.policies.base import PolicyTurn
from agent.loop.policies.scripted import ScriptedPolicy, call, submit, write
from agent.loop.tools import Toolbox, list_skills
from agent.loop.trajectory import to_record
from tests.agent.loop.conftest import CONFIG, PROBLEM, candidate
from tests.agent.loop.policies.tiny_qwen import CHAT_TEMPLATE

MALFORMED = '{"source": "class ModelNew'


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real run through the real tools: a wrong kernel (reward -1), a skill read and a malformed call in
    one turn, a turn without a tool call, and a refused submit. Python candidates only: nothing to compile."""
    turns = [write(candidate("fault_py_wrong_shape"), "A first try."),
             PolicyTurn("Reading up.", [call("read_skill", {"name": list_skills()[0]}, id="skill"),
                                        call("write_candidate", MALFORMED, id="bad")]),
             PolicyTurn("Thinking without acting.", []),
             submit("best")]
    with Evaluator(CONFIG, cache_root=tmp_path_factory.mktemp("export-cache")) as evaluator:
        toolbox = Toolbox(evaluator, CONFIG)
        state = loop.run(loop.start(PROBLEM, toolbox), ScriptedPolicy(turns), toolbox, loop.Budgets(max_turns=4))
    assert state.turn == 4 and state.turns[0].verdicts[0]["status"] == "incorrect"
    return to_record(state)


def _hand_made(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base = {"version": 1, "policy": "openai:m", "device": "cuda", "problem_source": "p", "messages": messages,
            "tools": [{"type": "function", "function": {"name": "submit", "parameters": {"type": "object"}}}],
            "turn_rewards": [], "turn_statuses": [], "final_reward": -1.0, "best_turn": None, "best_source": None,
            "best_speedup_vs_eager": None, "best_speedup_vs_compile": None, "status": "stopped",
            "stop_reason": "turn budget spent", "turns": 0, "prompt_tokens": 0, "completion_tokens": 0,
            "wall_seconds": 0.0, "gpu_seconds": 0.0}
    return {**base, **fields}


def _expected_arguments(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def test_a_real_run_round_trips_through_save_to_disk(record: dict[str, Any], tmp_path: Path) -> None:
    save([record], tmp_path / "ds")
    dataset = load_from_disk(str(tmp_path / "ds"))
    assert dataset.features == FEATURES and dataset.num_rows == 1
    row = dataset[0]
    for name in ("turn_rewards", "turn_statuses", "final_reward", "status", "stop_reason", "turns", "policy",
                 "prompt_tokens", "completion_tokens", "problem_source", "best_source", "tools"):
        assert row[name] == record[name], name
    assert row["turn_rewards"] == [-1.0, 0.0, 0.0, 0.0] and row["policy"] == "scripted"
    assert len(row["messages"]) == len(record["messages"])
    for got, sent in zip(row["messages"], record["messages"]):
        assert (got["role"], got["content"], got["tool_call_id"]) == (sent["role"], sent["content"],
                                                                      sent.get("tool_call_id"))
        assert [(c["id"], c["type"], c["function"]["name"], c["function"]["arguments"]) for c in got["tool_calls"]] \
            == [(c["id"], c["type"], c["function"]["name"], _expected_arguments(c["function"]["arguments"]))
                for c in sent.get("tool_calls", [])]
    calls = {c["id"]: c["function"] for m in row["messages"] for c in m["tool_calls"]}
    assert calls["bad"]["arguments"] == MALFORMED  # the model's mistake, kept as it wrote it
    assert calls["skill"]["arguments"] == {"name": list_skills()[0]}  # a JSON object, as chat templates want
    answers = {m["tool_call_id"]: m["content"] for m in row["messages"] if m["role"] == "tool"}
    assert "not valid JSON" in answers["bad"]


def test_a_row_renders_with_a_qwen_chat_template_and_its_tools(record: dict[str, Any]) -> None:
    templates = pytest.importorskip("transformers.utils.chat_template_utils", reason="transformers is not installed")
    row = to_dataset([record])[0]
    rendered, _ = templates.render_jinja_template([row["messages"]], tools=row["tools"], chat_template=CHAT_TEMPLATE)
    text = rendered[0]
    assert '"name": "read_skill", "arguments": {"name": ' in text  # arguments rendered once, as an object
    assert "<tool_response>" in text
    listed = text.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0]
    assert [json.loads(line) for line in listed.splitlines()] == record["tools"]  # the schemas, as offered


def test_heterogeneous_conversations_share_one_schema() -> None:
    plain = _hand_made([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                        {"role": "assistant", "content": "no tools here"},
                        {"role": "user", "content": loop.NO_TOOL_CALL}], turn_rewards=[0.0], turn_statuses=[[]])
    tooled = _hand_made([{"role": "system", "content": "s"}, {"role": "user", "content": ""},
                         {"role": "assistant", "content": None,
                          "tool_calls": [{"id": "c0", "type": "function",
                                          "function": {"name": "submit", "arguments": '{"candidate": "best"}'}}]},
                         {"role": "tool", "tool_call_id": "c0", "content": ""}],
                        best_turn=0, best_source="class ModelNew: ...", best_speedup_vs_eager=1.7,
                        best_speedup_vs_compile=1.1, final_reward=3.0, turn_rewards=[3.0], turn_statuses=[["accepted"]])
    dataset = to_dataset([plain, tooled])
    assert dataset.features == FEATURES and dataset.num_rows == 2
    first, second = dataset[0], dataset[1]
    assert first["messages"][2] == {"role": "assistant", "content": "no tools here", "tool_calls": [],
                                    "tool_call_id": None}
    assert second["messages"][2]["content"] == "" and second["messages"][1]["content"] == ""
    assert second["messages"][2]["tool_calls"][0]["function"] == {"name": "submit", "arguments": {"candidate": "best"}}
    assert second["messages"][3] == {"role": "tool", "content": "", "tool_calls": [], "tool_call_id": "c0"}
    assert (first["best_speedup_vs_eager"], second["best_speedup_vs_eager"]) == (None, 1.7)
    assert second["turn_statuses"] == [["accepted"]] and first["turn_statuses"] == [[]]


def test_it_refuses_what_is_not_a_trajectory_record() -> None:
    with pytest.raises(ValueError, match="record 1 is not a version 1 trajectory record"):
        to_dataset([_hand_made([]), {"messages": []}])
    incomplete = _hand_made([])
    del incomplete["final_reward"]
    with pytest.raises(ValueError, match="lacks final_reward"):
        to_dataset([incomplete])


def test_json_lines_round_trip(record: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    assert write_jsonl([record], path) == 1
    assert write_jsonl([_hand_made([])], path, append=True) == 1
    assert read_jsonl(path) == [record, _hand_made([])]


# ---------------------------------------------------------------------------------- the CLI

def main(argv: list[str]) -> int:
    try:
        return cli_main(argv)
    except SystemExit as exc:
        return exc.code


def test_export_writes_a_loadable_dataset(record: dict[str, Any], tmp_path: Path, capsys) -> None:
    runs, out = tmp_path / "runs.jsonl", tmp_path / "dataset"
    write_jsonl([record, _hand_made([])], runs)  # as optimize --trajectory appends them, one run a line
    assert main(["export", str(runs), "--out", str(out)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 2 trajectories to {out}"
    dataset = load_from_disk(str(out))
    assert dataset.num_rows == 2 and dataset.features == FEATURES
    assert dataset[0]["turn_rewards"] == record["turn_rewards"] and dataset[1]["policy"] == "openai:m"


def test_export_refuses_bad_input_with_status_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_hand_made([])) + "\n{not json\n")
    assert main(["export", str(bad), "--out", str(tmp_path / "out")]) == 2
    assert "line 2 is not JSON" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "out")]) == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["export", str(empty), "--out", str(tmp_path / "out")]) == 2
    assert "no trajectory records" in capsys.readouterr().err
