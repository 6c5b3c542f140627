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
    call_command("import_kernelbench", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_imports_one_level_skipping_invalid_files_with_the_reason(checkout, owner):
    out, err = _run(str(checkout), "--level", "1", "--owner", "owner")
    assert "created 2, already there 0, skipped 1" in out
    assert "skipped level1/3_Broken.py:" in err
    assert sorted(Problem.objects.filter(owner=owner).values_list("name", flat=True)) == [
        "level1/10_Row_sum.py", "level1/2_ReLU_scale.py"]


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
