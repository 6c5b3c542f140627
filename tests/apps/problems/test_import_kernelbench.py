from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from apps.problems.models import Problem

pytestmark = pytest.mark.django_db

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture
def checkout(tmp_path):
    """A KernelBench-shaped checkout: two levels, one file in level 1 that is not a problem."""
    level1, level2 = tmp_path / "KernelBench" / "level1", tmp_path / "KernelBench" / "level2"
    level1.mkdir(parents=True)
    level2.mkdir()
    (level1 / "10_Row_sum.py").write_text((EXAMPLES / "row_sum.py").read_text())
    (level1 / "2_ReLU_scale.py").write_text((EXAMPLES / "relu_scale_bias.py").read_text())
    (level1 / "3_Broken.py").write_text("import torch\n\nclass NotAModel:\n    pass\n")
    (level2 / "1_Softmax.py").write_text((EXAMPLES / "softmax_rows.py").read_text())
    return tmp_path


def _run(*args):
    out, err = StringIO(), StringIO()
    call_command("import_kernelbench", *args, "--in-process", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_imports_one_level_skipping_invalid_files_with_the_reason(checkout, owner):
    out, err = _run(str(checkout), "--level", "1", "--owner", "owner")
    assert "created 2, already there 0, skipped 1" in out
    assert "skipped level1/3_Broken.py: line " in err and "3/3" in err  # a reason per file, and the progress bar
    assert sorted(Problem.objects.filter(owner=owner).values_list("name", flat=True)) == [
        "level1/10_Row_sum", "level1/2_ReLU_scale"]


def test_it_leaves_problems_the_user_already_has_and_reads_every_level(checkout, owner):
    _run(str(checkout), "--level", "1", "--owner", "owner")
    out, _ = _run(str(checkout / "KernelBench"), "--owner", "owner")
    assert "created 1, already there 2, skipped 1" in out and Problem.objects.count() == 3


def test_it_says_what_is_wrong_with_the_path_or_the_owner(tmp_path, checkout, owner):
    with pytest.raises(CommandError, match="not a KernelBench checkout"):
        _run(str(tmp_path / "nowhere"), "--owner", "owner")
    with pytest.raises(CommandError, match="no level3 folder"):
        _run(str(checkout), "--level", "3", "--owner", "owner")
    with pytest.raises(CommandError, match="No user 'ghost'"):
        _run(str(checkout), "--owner", "ghost")


def test_it_tags_imported_problems_as_kernelbench(checkout, owner):
    _run(str(checkout), "--level", "2", "--owner", "owner")
    assert list(Problem.objects.values_list("origin", flat=True)) == ["kernelbench"]


def test_with_redis_and_no_build_worker_it_says_so_at_once_instead_of_waiting_on_every_file(checkout, owner, settings):
    import time

    if settings.EMBEDDED:
        pytest.skip("needs REDIS_URL: the embedded default checks in-process")
    started = time.monotonic()
    with pytest.raises(CommandError, match="No worker serves the build queue"):
        call_command("import_kernelbench", str(checkout), "--owner", "owner", stdout=StringIO(), stderr=StringIO())
    assert time.monotonic() - started < 20 and not Problem.objects.exists()


def test_under_make_run_it_imports_in_its_own_process_without_a_worker_and_quickly(checkout, tmp_path):
    """The embedded default (no DATABASE_URL, no REDIS_URL), as `make run` leaves it: the command must not wait on
    a `build` worker that cannot exist; it checks each file itself, with a progress bar and a reason per skip."""
    import os
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[3]
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(SQLITE_PATH=str(tmp_path / "studio.sqlite3"), KSTUDIO_DEVICE="cpu")

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True,
                              timeout=600)

    assert manage("migrate", "--noinput", "-v0").returncode == 0
    assert manage("shell", "-c", "from django.contrib.auth.models import User; User.objects.create_user('kb')").returncode == 0
    started = time.monotonic()
    done = manage("import_kernelbench", str(checkout), "--owner", "kb")
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "created 3, already there 0, skipped 1" in done.stdout, done.stdout + done.stderr
    assert "skipped level1/3_Broken.py: line " in done.stderr and "4/4" in done.stderr
    # Before: every file waited 90 s for a worker and was skipped. Four small files take seconds.
    print(f"import of 4 files under the embedded default: {seconds:.1f} s")
    assert seconds < 90
