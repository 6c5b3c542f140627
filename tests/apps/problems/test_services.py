import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from apps.problems.models import Problem
from apps.core.errors import Refused
from apps.problems.services import create_problem, read_source
from tests.apps.cast import PROBLEM

pytestmark = pytest.mark.django_db


def test_it_creates_a_problem_with_its_hash_and_validation(owner):
    p = create_problem(owner, "silu.py", PROBLEM.read_text())
    assert p.owner == owner and len(p.source_hash) == 64 and p.validation["ok"] is True and not p.shared


def test_it_rejects_a_syntax_error_with_line_and_column_and_creates_nothing(owner):
    with pytest.raises(Refused) as info:
        create_problem(owner, "bad.py", "import torch\ndef f(:\n    pass\n")
    issue = info.value.issues[0]
    assert issue.line == 2 and issue.col and "syntax error" in issue.message
    assert Problem.objects.count() == 0


def test_it_rejects_a_module_without_model_or_get_inputs(owner):
    with pytest.raises(Refused) as info:
        create_problem(owner, "empty.py", "import torch\nx = 1\n")
    text = " ".join(i.message for i in info.value.issues)
    assert "Model" in text and "get_inputs" in text
    assert Problem.objects.count() == 0


def test_it_rejects_a_file_that_is_not_utf8():
    with pytest.raises(Refused, match="not UTF-8"):
        read_source(SimpleUploadedFile("latin.py", "x = 'caf\xe9'\n".encode("latin-1")), "")


def test_it_rejects_a_file_over_the_size_limit(settings):
    settings.KSTUDIO_MAX_UPLOAD_BYTES = 100
    with pytest.raises(Refused, match="over the 100-byte limit"):
        read_source(SimpleUploadedFile("big.py", b"#" * 101), "")
    with pytest.raises(Refused, match="over the 100-byte limit"):
        read_source(None, "#" * 101)


def test_it_rejects_an_empty_upload():
    with pytest.raises(Refused, match="Nothing was uploaded"):
        read_source(None, "  \n")


BIG_SOFTMAX = '''import torch
import torch.nn as nn

BATCH = {batch}
DIM = 393216


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
'''


def test_a_problem_whose_inputs_cannot_fit_is_refused_at_once_naming_its_footprint_and_the_limit(owner, monkeypatch):
    from apps.problems import services

    monkeypatch.setattr(services, "check_in_sandbox", lambda *a, **k: pytest.fail("the sandbox was asked"))
    with pytest.raises(Refused) as info:
        create_problem(owner, "softmax.py", BIG_SOFTMAX.format(batch=16384))
    message = info.value.message
    assert "its inputs alone take 24.0 GiB" in message and "at most 16.0 GiB" in message
    assert "Traceback" not in message and not Problem.objects.exists()


def test_a_problem_that_runs_out_of_memory_in_the_sandbox_gets_a_plain_message_not_the_allocators_traceback(owner, monkeypatch):
    from agent.engine.evaluate import ProblemError
    from apps.runs import engine

    class OutOfMemory:
        def check_problem(self, *args, **kwargs):
            raise ProblemError('the reference failed: Traceback (most recent call last):\n  File "zygote.py", line 9\n'
                               "RuntimeError: [enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
                               "memory: you tried to allocate 25769803776 bytes")

    monkeypatch.setattr(engine, "evaluator", OutOfMemory)
    with pytest.raises(Refused) as info:
        create_problem(owner, "softmax.py", BIG_SOFTMAX.format(batch=4096))
    message = info.value.message
    assert message.startswith("The problem is too big for this studio: its inputs take 6.0 GiB, and running it ran out")
    assert "16.0 GiB" in message and "zygote" not in message and "Traceback" not in message


def test_a_problem_is_named_without_its_py_suffix(owner):
    assert create_problem(owner, "silu.py", PROBLEM.read_text()).name == "silu"
    assert create_problem(owner, " level1/2_ReLU.py ", PROBLEM.read_text() + "\n").name == "level1/2_ReLU"


def test_a_problem_whose_traced_footprint_cannot_fit_is_refused_with_it_and_nothing_is_created(owner):
    # Its sizes are not literals (the source alone does not say them): the check traces them on meta tensors and
    # refuses at once, allocating nothing (KernelBench's GPU sizes on a CPU studio).
    source = PROBLEM.read_text().replace("def get_inputs():", "ROWS = int('4194304')\n\n\ndef get_inputs():\n    "
                                                                  "return [torch.randn(ROWS, FEATURES)]\n\n\ndef _unused():")
    with pytest.raises(Refused) as info:
        create_problem(owner, "huge.py", source)
    message = info.value.message
    assert message.startswith("The problem is too big for this studio: its footprint is inputs 16.0 GiB"), message
    assert "at most 16.0 GiB" in message and "Traceback" not in message and not Problem.objects.exists()
