"""The command line as users and scripts call it: a real subprocess, real builds, real sandbox."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Real processes (the agent's CLI, pip, a production Django): the slow tier.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpus"


def _run(*args, cache):
    env = dict(os.environ, KSTUDIO_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=900)


def test_it_prints_exactly_one_json_verdict_with_json(tmp_path):
    proc = _run("evaluate", str(CORPUS / "problems/elementwise_silu_bias.py"),
                str(CORPUS / "candidates/legit_cpp_silu_bias.py"), "--device", "cpu", "--json",
                "--no-compile-baseline", cache=tmp_path)
    assert proc.returncode == 0, proc.stderr
    verdict = json.loads(proc.stdout)  # the whole of stdout is one JSON document
    assert verdict["status"] == "accepted" and verdict["correct"] is True
    assert verdict["version"] == 1
    timing = verdict["timing"]
    assert timing["candidate_ms"] > 0 and timing["speedup_vs_eager"] > 0 and timing["compile_ms"] is None
    assert {"toolchain", "hardware", "flags", "trials", "build"} <= set(verdict)


def test_it_exits_with_2_and_a_clear_message_for_an_invalid_problem(tmp_path):
    bad = tmp_path / "problem.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n")
    proc = _run("evaluate", str(bad), str(CORPUS / "candidates/legit_cpp_silu_bias.py"), "--json", cache=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "get_inputs" in proc.stderr


def test_it_exits_with_1_for_a_candidate_that_does_not_build(tmp_path):
    proc = _run("evaluate", str(CORPUS / "problems/elementwise_silu_bias.py"),
                str(CORPUS / "candidates/fault_cpp_build_error.py"), "--json", "--no-timing", cache=tmp_path)
    assert proc.returncode == 1, proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "build_error"
    assert "error" in verdict["message"].lower() or "error" in verdict["build"]["log"].lower()


def test_a_candidates_wall_clock_limit_is_the_studios_300_s_unless_given_and_a_hang_ends_at_the_one_given(tmp_path):
    from agent.cli import CANDIDATE_SECONDS, _parser

    # EvalConfig's own 120 s ended an honest CPU evaluation of KernelBench's 40_LayerNorm at its size as a timeout.
    assert CANDIDATE_SECONDS == 300 and _parser().parse_args(["optimize", "p.py"]).candidate_seconds == 300
    proc = _run("evaluate", str(CORPUS / "problems/elementwise_silu_bias.py"), str(CORPUS / "candidates/fault_py_hang.py"),
                "--device", "cpu", "--json", "--no-compile-baseline", "--candidate-seconds", "8", cache=tmp_path)
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "timeout" and "8 s" in verdict["message"], verdict["message"]
    refused = _run("optimize", str(CORPUS / "problems/elementwise_silu_bias.py"), "--candidate-seconds", "0", cache=tmp_path)
    assert refused.returncode != 0 and "--candidate-seconds must be positive" in refused.stderr
