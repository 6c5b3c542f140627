"""studio-cli against a running studio: daphne and a Celery worker on the test database and Redis."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from apps.batches.models import Batch
from apps.batches.services import report
from tests import processes
from tests.apps.batches.conftest import builtin_endpoint  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]
TWO_EXAMPLES = [ROOT / "examples" / "relu_scale_bias.py", ROOT / "examples" / "row_sum.py"]


@pytest.fixture
def studio(tmp_path):
    env = processes.studio_env(API_THROTTLE_USER="100000/hour")
    url, web = processes.daphne(env, tmp_path / "daphne.log")
    work = processes.worker(env, "cli", log=tmp_path / "worker.log")
    yield url
    processes.stop([web, work])


@pytest.fixture
def token(django_user_model, builtin_endpoint):
    return Token.objects.create(user=django_user_model.objects.create_user("cli-user", password="cli-pass-123")).key


def cli(config: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studio_cli", "--config", str(config), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_it_refuses_to_log_in_with_a_wrong_token(studio, tmp_path):
    done = cli(tmp_path / "cli.json", "login", "--url", studio, "--token", "wrong")
    assert done.returncode == 2 and "token is not valid" in done.stderr and not (tmp_path / "cli.json").exists()


def test_it_submits_examples_with_the_builtin_policy_waits_and_prints_the_table(studio, token, tmp_path):
    config = tmp_path / "cli.json"
    assert cli(config, "login", "--url", studio, "--token", token).returncode == 0
    done = cli(config, "submit", *map(str, TWO_EXAMPLES), "--policy", "builtin", "--device", "cpu", "--turns", "2",
               "--wait", "--poll", "0.5", "--csv", str(tmp_path / "report.csv"), timeout=480)
    assert done.returncode == 0, done.stdout + done.stderr
    # Feedback from the first second: each file as it is checked, then each problem's stage as it changes.
    assert "[1/2] relu_scale_bias.py: checking" in done.stderr, done.stderr
    assert "relu_scale_bias (run " in done.stderr and " · stage " in done.stderr, done.stderr
    assert "finished · " in done.stderr
    batch = Batch.objects.get()
    stored = report(batch)
    assert stored["status"] == "finished"
    lines = done.stdout.splitlines()
    for row in stored["rows"]:  # each problem's line shows the verdict stored for its run
        line = next(line for line in lines if line.startswith(row["problem"]))
        assert row["verdict"] in line and ("yes" if row["correct"] else "no") in line
    summary = stored["summary"]
    assert f"{summary['correct']}/2 correct (correctness rate {summary['correctness_rate']:.1%})" in done.stdout
    assert f"fast_1={summary['fast_p']['1']:.2f}" in done.stdout and summary["correct"] >= 1
    assert (tmp_path / "report.csv").read_text().startswith("position,problem_id,problem")

    kernel = next(r["kernel_id"] for r in stored["rows"] if r["kernel_id"])
    fetched = cli(config, "download", str(kernel), "-o", str(tmp_path / "k.py"))
    assert fetched.returncode == 0 and "class ModelNew" in (tmp_path / "k.py").read_text()

    again = cli(config, "submit", str(TWO_EXAMPLES[0]), "--device", "cpu", "--turns", "1")
    assert again.returncode == 0 and Batch.objects.count() == 2
    assert batch.owner.problems.count() == 2  # the same file is not uploaded twice
