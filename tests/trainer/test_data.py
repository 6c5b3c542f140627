"""The stages' datasets from a DATA_DIR: problems for the GRPO prompts, trajectories filtered for rejection
fine-tuning (with a count per filter), (conversation, outcome) pairs for the critic."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from agent.loop import runner as loop
from trainer.config import DataConfig
from trainer.data import (DataError, critic_dataset, load_inputs, longest_repeat, malformed_calls, multi_turn_dataset,
                          rft_dataset, single_turn_dataset)
from trainer.stages.critic import render_conversation
from tests.trainer.records import CANDIDATE, EXAMPLES, ROW_SUM, failed, good, record, write_data

SOFTMAX = (EXAMPLES / "softmax_rows.py").read_text()


def test_it_reads_problems_and_trajectories_from_a_data_dir(tmp_path: Path) -> None:
    inputs = load_inputs(write_data(tmp_path, [good(), failed()], [("row_sum", ROW_SUM), ("softmax", SOFTMAX)]))
    assert [p.name for p in inputs.problems] == ["row_sum", "softmax"] and inputs.problems[0].device == "cpu"
    assert len(inputs.trajectories) == 2


@pytest.mark.parametrize("line, message", [
    ("not json", "line 1 is not JSON"),
    (json.dumps({"name": "x", "source": ROW_SUM}), "text fields name, source and device"),
    (json.dumps({"name": "x", "source": ROW_SUM, "device": "tpu"}), "device must be cpu or cuda"),
    (json.dumps({"name": "x", "source": "import torch\n", "device": "cpu"}), "problem 'x' is not in KernelBench's format"),
])
def test_it_names_the_bad_line_of_a_problems_file(tmp_path: Path, line: str, message: str) -> None:
    (tmp_path / "problems.jsonl").write_text(line + "\n")
    with pytest.raises(DataError, match=message):
        load_inputs(tmp_path)


def test_it_says_what_a_data_dir_must_hold(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no data directory"):
        load_inputs(tmp_path / "missing")
    with pytest.raises(DataError, match="holds neither trajectories/ nor problems.jsonl"):
        load_inputs(tmp_path)
    (tmp_path / "trajectories").mkdir()
    with pytest.raises(DataError, match="is not a dataset directory"):
        load_inputs(tmp_path)


def test_it_drops_trajectories_that_fail_a_filter_and_counts_each_filter(tmp_path: Path) -> None:
    write = ("write_candidate", {"source": CANDIDATE}, "status: accepted")
    records = [
        good(), good(speedup=2.0),
        failed(),                                                          # not correct
        good(speedup=0.8),                                                 # too slow
        record([write] * 2 + [("read_skill", {"name": "fusion"}, "...")] * 4),  # too many turns (6 > 5)
        record([write, ("write_candidate", '{"source": "class ModelNew', "error: not valid JSON")]),  # malformed
        record([write, ("compile_kernel", {"x": 1}, "error: unknown tool")]),                      # malformed
        record([write, ("benchmark", {"candidate": "best"}, "...")] + [write] * 3),                 # a loop
    ]
    inputs = load_inputs(write_data(tmp_path, records))
    dataset, report = rft_dataset(inputs.trajectories, DataConfig(min_speedup=1.0, max_turns=5, max_repeated_calls=2))
    assert report.dropped == {"not correct": 1, "too slow": 1, "too many turns": 1, "malformed tool calls": 2,
                              "loops": 1}
    assert (report.total, report.kept, len(dataset)) == (8, 2, 2)
    assert "2 of 8 trajectories kept" in str(report) and "2 malformed tool calls" in str(report)
    assert dataset.column_names == ["messages", "tools"]
    # The tool calls keep their own arguments (JSON values), not a union of every tool's argument names.
    calls = [c for m in dataset[0]["messages"] for c in m["tool_calls"]]
    assert [c["function"]["arguments"] for c in calls] == [{"source": CANDIDATE}, {"candidate": "best"}]
    assert {t["function"]["name"] for t in dataset[0]["tools"]} >= {"write_candidate", "submit"}


def test_it_counts_repeats_in_a_row_only() -> None:
    def calls(*names: str) -> list[dict]:
        return [{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": n, "arguments": {}}}]}
                for n in names]

    assert longest_repeat(calls("a", "b", "a", "b")) == 1
    assert longest_repeat(calls("a", "a", "b", "a", "a", "a")) == 3
    assert malformed_calls(calls("write_candidate", "profile")) == 0
    assert malformed_calls(calls("nonsense")) == 1


def test_it_pairs_each_trajectory_with_its_outcome_for_the_critic(tmp_path: Path, tiny_model: Path) -> None:
    inputs = load_inputs(write_data(tmp_path, [good(), failed()]))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    dataset = critic_dataset(inputs.trajectories, render_conversation(tokenizer), DataConfig())
    assert dataset["target"] == [2.0, -1.0]
    text = dataset[0]["text"]
    assert text.startswith("<|im_start|>system\nYou are a performance engineer")
    assert '<tool_call>\n{"name": "write_candidate", "arguments": {"source": "import torch' in text
    assert "<tool_response>\nstatus: accepted" in text
    # The run's length limit applies to the critic too.
    assert len(critic_dataset(inputs.trajectories, render_conversation(tokenizer), DataConfig(max_turns=1))) == 1


def test_it_builds_single_turn_prompts_with_what_the_reward_needs(tmp_path: Path) -> None:
    inputs = load_inputs(write_data(tmp_path, [], [("row_sum", ROW_SUM)]))
    row = single_turn_dataset(inputs.problems)[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert "load_inline" in row["prompt"][0]["content"] and "```python" in row["prompt"][0]["content"]
    assert ROW_SUM.rstrip() in row["prompt"][1]["content"]
    assert (row["problem_source"], row["device"], row["name"]) == (ROW_SUM, "cpu", "row_sum")


def test_it_opens_multi_turn_rollouts_exactly_as_the_agent_opens_a_run(tmp_path: Path) -> None:
    inputs = load_inputs(write_data(tmp_path, [], [("softmax", SOFTMAX)]))
    row = multi_turn_dataset(inputs)[0]
    assert row["prompt"] == loop.start(SOFTMAX, device="cpu").messages
    assert row["problem_source"] == SOFTMAX and row["device"] == "cpu"


def test_it_takes_the_multi_turn_problems_from_the_trajectories_without_a_problems_file(tmp_path: Path) -> None:
    records = [good(), failed(), record([("submit", {}, "refused")], problem=SOFTMAX, final_reward=-1.0)]
    dataset = multi_turn_dataset(load_inputs(write_data(tmp_path, records)))
    assert dataset["problem_source"] == [ROW_SUM, SOFTMAX]
