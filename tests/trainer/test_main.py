"""`python -m trainer`: a two-stage run under `accelerate launch` (the studio's contract: result.json,
metrics.jsonl, a final policy the agent loads), and the one-line error of a bad run."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from agent.loop.policies.transformers_local import TransformersPolicy
from agent.loop.tools import TOOL_SCHEMAS
from trainer.__main__ import main
from trainer.launch import command
from tests.trainer.conftest import tiny_config
from tests.trainer.records import ROW_SUM, failed, good, write_data

ROOT = Path(__file__).resolve().parents[2]


def test_it_runs_two_stages_under_accelerate_and_leaves_a_policy_the_agent_loads(tmp_path: Path) -> None:
    data = write_data(tmp_path / "data", [good(), failed()], [("row_sum", ROW_SUM)])
    tiny_config("random:tiny", stages=["rft", "grpo_single"]).to_yaml(tmp_path / "run.yaml")
    out = tmp_path / "out"
    argv = command(tmp_path / "run.yaml", data, out)
    assert "--cpu" in argv and argv[argv.index("--num_processes") + 1] == "1"
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]

    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "succeeded" and result["checkpoint"] == str((out / "final").resolve())
    assert [s["stage"] for s in result["stages"]] == ["rft", "grpo_single"]
    assert result["stages"][0]["filters"]["kept"] == 1 and result["stages"][1]["steps"] == 2
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(line["stage"], line["step"]) for line in lines] == [("rft", 1), ("rft", 2), ("grpo_single", 1),
                                                                 ("grpo_single", 2)]
    assert all(isinstance(line["loss"], float) and line["time"] > 0 for line in lines)
    assert [line["reward"] for line in lines] == [None, None, -1.0, -1.0]
    assert "[rft] step 1/2, loss" in done.stderr and "[grpo_single] step 2/2, loss" in done.stderr

    # The final policy is a checkpoint the agent runs: its chat template renders the tools, it generates.
    policy = TransformersPolicy(out / "final", max_new_tokens=6, seed=0)
    turn = policy.respond([{"role": "user", "content": "Write ModelNew."}], TOOL_SCHEMAS)
    assert turn.completion_tokens > 0 and policy.name == "transformers:final"


def test_it_fails_in_one_line_and_records_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "bad.yaml").write_text("base_model: random:tiny\nstages: [grpo_single, ppo]\n")
    assert main(["run", "--config", str(tmp_path / "bad.yaml"), "--data", str(tmp_path / "data"),
                 "--output", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("trainer: error: stages has unknown names ['ppo']")
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["status"] == "failed" and "unknown names ['ppo']" in result["error"]

    tiny_config("random:tiny", stages=["rft"]).to_yaml(tmp_path / "rft.yaml")
    assert main(["run", "--config", str(tmp_path / "rft.yaml"), "--data", str(tmp_path / "data"),
                 "--output", str(tmp_path / "out")]) == 1
    assert "holds neither trajectories/ nor problems.jsonl" in capsys.readouterr().err


def test_it_writes_a_tiny_model_and_a_problems_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tiny-model", str(tmp_path / "model")]) == 0
    assert (tmp_path / "model" / "config.json").is_file() and (tmp_path / "model" / "chat_template.jinja").is_file()
    examples = sorted((ROOT / "examples").glob("row_*.py"))
    assert main(["problems", str(tmp_path / "problems.jsonl"), *map(str, examples), "--device", "cuda"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "problems.jsonl").read_text().splitlines()]
    assert [r["name"] for r in rows] == ["row_max", "row_sum"] and {r["device"] for r in rows} == {"cuda"}
    assert main(["problems", str(tmp_path / "p.jsonl"), str(ROOT / "README.md"), "--device", "cpu"]) == 1
    assert "is not in KernelBench's format" in capsys.readouterr().err
