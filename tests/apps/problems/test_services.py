import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.problems.models import Problem
from apps.problems.services import UploadRejected, create_problem, read_source
from tests.apps.cast import PROBLEM

pytestmark = pytest.mark.django_db


def test_it_creates_a_problem_with_its_hash_and_validation(owner):
    p = create_problem(owner, "silu.py", PROBLEM.read_text())
    assert p.owner == owner and len(p.source_hash) == 64 and p.validation["ok"] is True and not p.shared


def test_it_rejects_a_syntax_error_with_line_and_column_and_creates_nothing(owner):
    with pytest.raises(UploadRejected) as info:
        create_problem(owner, "bad.py", "import torch\ndef f(:\n    pass\n")
    issue = info.value.issues[0]
    assert issue.line == 2 and issue.col and "syntax error" in issue.message
    assert Problem.objects.count() == 0


def test_it_rejects_a_module_without_model_or_get_inputs(owner):
    with pytest.raises(UploadRejected) as info:
        create_problem(owner, "empty.py", "import torch\nx = 1\n")
    text = " ".join(i.message for i in info.value.issues)
    assert "Model" in text and "get_inputs" in text
    assert Problem.objects.count() == 0


def test_it_rejects_a_file_that_is_not_utf8():
    with pytest.raises(UploadRejected, match="not UTF-8"):
        read_source(SimpleUploadedFile("latin.py", "x = 'caf\xe9'\n".encode("latin-1")), "")


def test_it_rejects_a_file_over_the_size_limit(settings):
    settings.KSTUDIO_MAX_UPLOAD_BYTES = 100
    with pytest.raises(UploadRejected, match="over the 100-byte limit"):
        read_source(SimpleUploadedFile("big.py", b"#" * 101), "")
    with pytest.raises(UploadRejected, match="over the 100-byte limit"):
        read_source(None, "#" * 101)


def test_it_rejects_an_empty_upload():
    with pytest.raises(UploadRejected, match="Nothing was uploaded"):
        read_source(None, "  \n")
