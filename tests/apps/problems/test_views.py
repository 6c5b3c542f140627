import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.problems.models import Problem
from tests.apps.cast import PROBLEM

pytestmark = pytest.mark.django_db
NAMES = {"model_name": "Model", "get_inputs_name": "get_inputs", "get_init_inputs_name": "get_init_inputs"}


@pytest.mark.parametrize("upload, message", [
    (SimpleUploadedFile("s.py", b"def f(:\n  pass\n"), "syntax error"),
    (SimpleUploadedFile("m.py", b"import torch\nx = 1\n"), "get_inputs"),
    (SimpleUploadedFile("l.py", "x = 'caf\xe9'".encode("latin-1")), "not UTF-8"),
    (SimpleUploadedFile("big.py", b"#" * 2_000_001), "limit"),
    (SimpleUploadedFile("crash.py", PROBLEM.read_bytes().replace(b"BATCH = 1024", b"BATCH = 1024 // 0")),
     "ZeroDivisionError"),
])
def test_it_shows_why_a_bad_upload_was_refused_and_creates_nothing(client, owner, upload, message):
    client.force_login(owner)
    response = client.post("/problems/new/", {"file": upload, **NAMES})
    assert response.status_code == 400 and message in response.content.decode()
    assert Problem.objects.count() == 0


def test_it_creates_a_problem_from_pasted_code_and_shows_it(client, owner):
    client.force_login(owner)
    response = client.post("/problems/new/", {"source": PROBLEM.read_text(), "name": "silu.py", **NAMES})
    problem = Problem.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/problems/{problem.pk}/"
    assert problem.name == "silu"  # a problem is not a file: its name has no ".py"
    assert "Evaluate my kernel" in client.get(response["Location"]).content.decode()


def test_it_marks_the_line_of_a_candidate_error_on_the_problem_page(client, owner, problem):
    client.force_login(owner)
    response = client.post(f"/runs/start/{problem.pk}/", {"source": "import torch\nclass ModelNew(:\n  pass\n"})
    assert response.status_code == 400 and "line 2" in response.content.decode()
