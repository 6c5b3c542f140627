"""`python -m agent optimize`: the scripted demo runs the real tools end to end with no model."""
import json

import pytest

from agent.cli import main as cli_main
from tests.agent.loop.conftest import CORPUS

# Real processes (the agent's CLI, pip, a production Django): the slow tier.
pytestmark = pytest.mark.slow

PROBLEM = str(CORPUS / "problems" / "elementwise_silu_bias.py")


def main(argv: list[str]) -> int:
    """The exit status, as `python -m agent` would end with it."""
    try:
        return cli_main(argv)
    except SystemExit as exc:
        return exc.code


def test_it_prints_one_json_document_with_the_best_verdict(capsys, cache_dir, tmp_path):
    trajectory = tmp_path / "run.json"
    code = main(["optimize", PROBLEM, "--policy", "scripted-demo", "--device", "cpu", "--json", "--no-compile-baseline",
                 "--cache-dir", str(cache_dir), "--trajectory", str(trajectory)])
    printed = capsys.readouterr()
    outcome = json.loads(printed.out)  # exactly one document: json.loads refuses trailing data
    assert code == 0, outcome
    assert outcome["status"] == "submitted" and outcome["verdict"]["status"] == "accepted"
    assert outcome["best_turn"] == 1 and "ModelNew" in outcome["best_source"]
    # The progress lines count turns from 1, as the run page does; the JSON keeps the state's 0-based index.
    assert "\nturn 1: " in printed.err and "\nturn 0: " not in printed.err
    record = json.loads(trajectory.read_text())
    assert record["turn_rewards"][0] == -1.0 and record["final_reward"] >= 1.0


def test_it_replays_the_candidate_files_it_is_given(capsys, cache_dir):
    code = main(["optimize", PROBLEM, "--script", str(CORPUS / "candidates" / "fault_py_wrong_shape.py"), "--json",
                 "--no-compile-baseline", "--cache-dir", str(cache_dir)])
    outcome = json.loads(capsys.readouterr().out)
    assert code == 1 and outcome["verdict"] is None and outcome["status"] == "stopped"
    assert outcome["turns"] == 3  # write, benchmark, submit (refused): the script's end is the turn budget


def test_it_refuses_bad_input_with_status_2(capsys, tmp_path):
    assert main(["optimize", str(tmp_path / "missing.py"), "--json"]) == 2
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n")
    assert main(["optimize", str(bad), "--json"]) == 2
    assert main(["optimize", PROBLEM, "--policy", "openai"]) == 2  # no --model
    assert "--model" in capsys.readouterr().err
