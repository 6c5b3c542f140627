"""Static validation of problems and candidates: AST only, never executing the uploaded code."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from agent.engine.validation import MAX_SOURCE_BYTES, Issue, ProblemNames, ValidationReport, validate_candidate, validate_problem


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


PROBLEM = src(
    """
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim

        def forward(self, a, b):
            return a + b

    def get_inputs():
        return [torch.randn(4, 4), torch.randn(4, 4)]

    def get_init_inputs():
        return [4]
    """
)

CANDIDATE = src(
    """
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    ext = load_inline(name="add", cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);",
                      cuda_sources="/* kernel */", functions=["add"])

    class ModelNew(nn.Module):
        def __init__(self, dim):
            super().__init__()

        def forward(self, a, b):
            return ext.add(a, b)
    """
)


def messages(report: ValidationReport, severity: str) -> str:
    return "\n".join(i.message for i in report.issues if i.severity == severity)


def only(report: ValidationReport, severity: str) -> Issue:
    found = [i for i in report.issues if i.severity == severity]
    assert len(found) == 1, report.issues
    return found[0]


# --- problems ------------------------------------------------------------------------------------


def test_it_accepts_a_kernelbench_problem_without_issues() -> None:
    report = validate_problem(PROBLEM)
    assert report.ok
    assert report.issues == []
    assert report.kind == "problem"


def test_it_rejects_a_problem_without_get_inputs() -> None:
    report = validate_problem(PROBLEM.replace("def get_inputs():", "def make_inputs():"))
    assert not report.ok
    error = only(report, "error")
    assert "get_inputs" in error.message and "add `def get_inputs():`" in error.message


def test_it_rejects_a_problem_without_get_init_inputs() -> None:
    report = validate_problem(PROBLEM.replace("def get_init_inputs():", "def init_inputs():"))
    assert "get_init_inputs" in only(report, "error").message


def test_it_rejects_a_problem_without_model() -> None:
    report = validate_problem(PROBLEM.replace("class Model(", "class Net("))
    error = only(report, "error")
    assert "no class `Model`" in error.message and "upload form" in error.message


def test_it_accepts_a_problem_whose_names_are_mapped() -> None:
    source = PROBLEM.replace("class Model(", "class Net(").replace("get_inputs", "inputs").replace("get_init_inputs", "init_args")
    names = ProblemNames(model="Net", get_inputs="inputs", get_init_inputs="init_args")
    assert validate_problem(source, names=names).ok
    assert not validate_problem(source).ok


def test_it_refuses_problem_names_that_are_not_identifiers() -> None:
    with pytest.raises(ValueError, match="identifier"):
        ProblemNames(model="my model")


def test_it_rejects_a_model_bound_by_assignment_to_a_non_class() -> None:
    source = PROBLEM.replace("class Model(nn.Module):", "class Real(nn.Module):") + "Model = make_model()\n"
    error = only(validate_problem(source), "error")
    assert "must be a class" in error.message and error.line == source.count("\n")


def test_it_follows_a_simple_alias_to_a_class() -> None:
    source = PROBLEM.replace("class Model(nn.Module):", "class Real(nn.Module):") + "Model = Real\n"
    assert validate_problem(source).ok


def test_it_accepts_any_base_expression_for_model() -> None:
    source = PROBLEM.replace("class Model(nn.Module):", "class Model(torch.nn.modules.module.Module):")
    assert validate_problem(source).issues == []
    assert validate_problem(PROBLEM.replace("class Model(nn.Module):", "class Model:")).ok


def test_it_rejects_a_model_without_forward() -> None:
    source = PROBLEM.replace("def forward(self, a, b):", "def run(self, a, b):")
    error = only(validate_problem(source), "error")
    assert "no `forward`" in error.message
    assert error.line == 4 and error.col == 1
    assert "line 4" in error.message


def test_it_finds_forward_on_a_base_class_in_the_module() -> None:
    source = src(
        """
        import torch.nn as nn
        class Base(nn.Module):
            def forward(self, x):
                return x
        class Model(Base):
            pass
        def get_inputs(): return []
        def get_init_inputs(): return []
        """
    )
    assert validate_problem(source).issues == []


def test_it_only_warns_when_forward_may_come_from_an_imported_base() -> None:
    source = PROBLEM.replace("class Model(nn.Module):", "class Model(SomeLibraryModel):").replace("def forward(self, a, b):", "def helper(self, a, b):")
    report = validate_problem(source)
    assert report.ok
    assert "base class" in only(report, "warning").message


def test_it_rejects_get_inputs_with_required_parameters() -> None:
    error = only(validate_problem(PROBLEM.replace("def get_inputs():", "def get_inputs(batch):")), "error")
    assert "calls it with no arguments" in error.message and error.line == 12


def test_it_rejects_get_inputs_defined_as_a_class() -> None:
    source = PROBLEM.replace("def get_inputs():\n    return [torch.randn(4, 4), torch.randn(4, 4)]", "class get_inputs:\n    pass")
    assert "must be a function" in only(validate_problem(source), "error").message


def test_it_accepts_get_inputs_bound_to_a_lambda() -> None:
    source = PROBLEM.replace("def get_inputs():\n    return", "get_inputs = lambda:")
    assert validate_problem(source).ok


def test_it_reports_a_syntax_error_with_line_column_and_text() -> None:
    report = validate_problem("import torch\n\ndef get_inputs(:\n    return []\n")
    error = only(report, "error")
    assert (error.line, error.col) == (3, 16)
    assert "line 3" in error.message and "`def get_inputs(:`" in error.message
    assert report.to_dict()["ok"] is False


def test_it_shortens_the_offending_text_of_a_very_long_line() -> None:
    error = only(validate_problem("x = [" + "1, " * 10_000 + "\n"), "error")
    assert len(error.message) < 400


def test_it_rejects_an_empty_source() -> None:
    for empty in ("", "   \n\n\t\n"):
        assert "empty" in only(validate_problem(empty), "error").message
    assert "ModelNew" in only(validate_candidate(""), "error").message


def test_it_rejects_a_source_over_the_size_limit() -> None:
    big = PROBLEM + "#" * MAX_SOURCE_BYTES
    error = only(validate_problem(big), "error")
    assert "limit" in error.message


def test_it_rejects_a_source_with_nul_characters() -> None:
    error = only(validate_problem("x = 1\ny = 2\0\n"), "error")
    assert error.line == 2 and "NUL" in error.message


def test_it_rejects_pathologically_nested_code_without_crashing() -> None:
    report = validate_problem("x = " + "-" * 200_000 + "1\n")
    assert not report.ok


def test_it_warns_about_a_duplicate_definition_and_says_the_last_wins() -> None:
    source = PROBLEM + "\ndef get_inputs():\n    return [torch.randn(2, 2), torch.randn(2, 2)]\n"
    report = validate_problem(source)
    assert report.ok
    warning = only(report, "warning")
    assert "defined again" in warning.message and "last" in warning.message and "line 12" in warning.message
    assert warning.line == 18


def test_it_warns_about_a_method_defined_twice_in_the_class() -> None:
    source = PROBLEM.replace("    def forward(self, a, b):\n        return a + b\n", "    def forward(self, a, b):\n        return a + b\n\n    def forward(self, a, b):\n        return a - b\n")
    assert "`forward` is defined again" in only(validate_problem(source), "warning").message


def test_it_does_not_call_alternatives_in_if_else_branches_duplicates() -> None:
    source = PROBLEM + src(
        """
        try:
            import triton
            def helper(): return 1
        except ImportError:
            def helper(): return 2
        """
    )
    assert validate_problem(source).issues == []


def test_it_accepts_a_main_guard_and_heavy_top_level_code_without_warnings() -> None:
    source = PROBLEM + src(
        """
        WEIGHTS = torch.randn(8192, 8192) @ torch.randn(8192, 8192)
        for _ in range(10 ** 9):
            pass
        if __name__ == "__main__":
            import subprocess
            subprocess.run(["nvidia-smi"])
            print(Model(4)(*get_inputs()))
        """
    )
    assert validate_problem(source).issues == []
    assert validate_candidate(CANDIDATE + source.replace("class Model(", "class Reference(")).warnings() == []


def test_it_says_when_a_definition_hides_under_the_main_guard() -> None:
    source = PROBLEM.replace("def get_init_inputs():\n    return [4]\n", 'if __name__ == "__main__":\n    def get_init_inputs():\n        return [4]\n')
    error = only(validate_problem(source), "error")
    assert "__main__" in error.message and "does not run on import" in error.message


def test_it_never_executes_the_uploaded_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    hostile = src(
        f"""
        open({str(marker)!r}, "w").write("ran")
        import os
        os.system("touch {marker}")
        raise SystemExit("top level ran")

        class Model:
            def forward(self, x):
                open({str(marker)!r}, "w").write("ran")
        def get_inputs(): return []
        def get_init_inputs(): return []
        """
    )
    problem = validate_problem(hostile)
    candidate = validate_candidate(hostile.replace("class Model:", "class ModelNew:"), problem_source=hostile)
    assert problem.ok and candidate.ok
    assert not marker.exists()


def test_its_report_is_json_serializable() -> None:
    report = validate_candidate(CANDIDATE.replace("def forward", "def run"))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["kind"] == "candidate" and data["ok"] is False and data["backend_hint"] == "cuda"
    assert set(data["issues"][0]) == {"severity", "message", "line", "col"}
    assert report.errors() and report.warnings() == []


# --- candidates ---------------------------------------------------------------------------------


def test_it_accepts_a_load_inline_candidate() -> None:
    report = validate_candidate(CANDIDATE, problem_source=PROBLEM)
    assert report.issues == []
    assert report.kind == "candidate"


def test_it_rejects_a_candidate_without_model_new() -> None:
    error = only(validate_candidate(CANDIDATE.replace("class ModelNew", "class Model")), "error")
    assert "no class `ModelNew`" in error.message


def test_it_rejects_a_candidate_whose_model_new_has_no_forward() -> None:
    error = only(validate_candidate(CANDIDATE.replace("def forward", "def compute")), "error")
    assert "no `forward`" in error.message and error.line == 8


def test_it_rejects_a_candidate_whose_forward_takes_other_inputs_than_the_problem() -> None:
    report = validate_candidate(CANDIDATE.replace("def forward(self, a, b):", "def forward(self, a):"), problem_source=PROBLEM)
    error = only(report, "error")
    assert "ModelNew.forward` takes 1 positional argument but `Model.forward` takes 2" in error.message
    assert error.line == 12


def test_it_rejects_a_candidate_whose_init_takes_other_arguments_than_the_problem() -> None:
    report = validate_candidate(CANDIDATE.replace("def __init__(self, dim):", "def __init__(self):"), problem_source=PROBLEM)
    assert "`ModelNew.__init__` takes 0 positional arguments but `Model.__init__` takes 1" in only(report, "error").message


def test_it_treats_a_missing_init_as_taking_no_arguments() -> None:
    candidate = CANDIDATE.replace("    def __init__(self, dim):\n        super().__init__()\n\n", "")
    assert "__init__" in only(validate_candidate(candidate, problem_source=PROBLEM), "error").message
    problem = PROBLEM.replace("    def __init__(self, dim):\n        super().__init__()\n        self.dim = dim\n\n", "")
    assert validate_candidate(candidate, problem_source=problem).issues == []


def test_it_accepts_defaults_and_star_args_that_cover_the_problems_signature() -> None:
    for signature in ("def forward(self, *inputs):", "def forward(self, a, b, c=None):", "def forward(self, a, *rest):"):
        report = validate_candidate(CANDIDATE.replace("def forward(self, a, b):", signature), problem_source=PROBLEM)
        assert report.issues == [], signature


def test_it_warns_when_signatures_only_partly_overlap() -> None:
    problem = PROBLEM.replace("def forward(self, a, b):", "def forward(self, a, b=None):")
    report = validate_candidate(CANDIDATE, problem_source=problem)
    assert report.ok
    assert "1 to 2 positional arguments" in only(report, "warning").message


def test_it_skips_the_signature_comparison_when_the_problem_does_not_parse() -> None:
    report = validate_candidate(CANDIDATE, problem_source="class Model(:\n")
    assert report.ok
    assert "does not parse" in only(report, "warning").message


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("import os\nos.system('nvidia-smi')\n", "`os.system`"),
        ("from os import system\nsystem('ls')\n", "`os.system`"),
        ("import os\nos.execv('/bin/sh', [])\n", "`os.execv`"),
        ("import subprocess\n", "`import subprocess`"),
        ("from subprocess import run\n", "`import subprocess`"),
        ("mod = __import__('subprocess')\n", "`import subprocess`"),
        ("import socket\n", "`import socket`"),
        ("import ctypes\n", "`import ctypes`"),
        ("import threading\n", "`import threading`"),
        ("from concurrent.futures import ThreadPoolExecutor\n", "`import concurrent.futures`"),
        ("import multiprocessing as mp\n", "`import multiprocessing`"),
        ("import time\ntime.perf_counter = lambda: 0.0\n", "`time.perf_counter`"),
        ("import time as t\nt.time = lambda: 0.0\n", "`time.time`"),
        ("torch.cuda.synchronize = lambda: None\n", "`torch.cuda.synchronize`"),
        ("torch.cuda.Event.elapsed_time = lambda self, other: 0.001\n", "`torch.cuda.Event.elapsed_time`"),
        ("setattr(torch.cuda, 'synchronize', lambda: None)\n", "`torch.cuda.synchronize`"),
        ("torch.allclose = lambda *a, **k: True\n", "`torch.allclose`"),
        ("s = torch.cuda.Stream()\n", "`torch.cuda.Stream`"),
        ("from torch.cuda import Stream\ns = Stream(priority=-1)\n", "`torch.cuda.Stream`"),
    ],
)
def test_it_warns_about_apis_the_evaluator_will_likely_reject(snippet: str, expected: str) -> None:
    report = validate_candidate(CANDIDATE + snippet)
    assert report.ok, "risky uses are warnings; the sandbox is the real defence"
    warning = only(report, "warning")
    assert expected in warning.message
    assert warning.line is not None and warning.line > CANDIDATE.count("\n")
    # Each warning says why the evaluator will likely reject it and what to do instead.
    assert any(word in warning.message for word in ("sandbox", "flagged", "tampering"))


def test_it_says_which_rejection_flag_a_warning_leads_to() -> None:
    assert "(timer_tampering)" in messages(validate_candidate(CANDIDATE + "import time\ntime.perf_counter = None\n"), "warning")
    assert "(side_stream)" in messages(validate_candidate(CANDIDATE + "s = torch.cuda.Stream()\n"), "warning")
    assert "(background_thread)" in messages(validate_candidate(CANDIDATE + "import threading\n"), "warning")


def test_it_warns_once_per_api_and_counts_the_other_uses() -> None:
    report = validate_candidate(CANDIDATE + "import os\nos.system('a')\nos.system('b')\nos.system('c')\n")
    assert "(and 2 more places)" in only(report, "warning").message


def test_it_does_not_warn_about_harmless_lookalikes() -> None:
    harmless = src(
        """
        import time
        start = time.perf_counter()
        self_stream = torch.cuda.current_stream()
        torch.backends.cudnn.benchmark = True
        class Holder:
            pass
        holder = Holder()
        holder.time = 3
        """
    )
    assert validate_candidate(CANDIDATE + harmless).issues == []


def test_it_does_not_give_candidate_warnings_for_problems() -> None:
    assert validate_problem(PROBLEM + "import subprocess\n").issues == []


@pytest.mark.parametrize(
    ("snippet", "backend"),
    [
        ("ext = load_inline(name='a', cpp_sources='x', cuda_sources='y')\n", "cuda"),
        ("ext = load_inline('a', 'x', 'y')\n", "cuda"),
        ("ext = torch.utils.cpp_extension.load_inline(name='a', cpp_sources='x')\n", "cpp"),
        ("ext = load_inline(name='a', cpp_sources='x', cuda_sources=None)\n", "cpp"),
        ("k = torch.cuda._compile_kernel(SRC, 'add')\n", "nvrtc"),
        ("import triton\nimport triton.language as tl\n@triton.jit\ndef k(x_ptr):\n    pass\n", "triton"),
        ("from triton import jit\n", "triton"),
        ("y = torch.relu(x)\n", None),
    ],
)
def test_it_guesses_the_backend(snippet: str, backend: str | None) -> None:
    base = "import torch\nfrom torch.utils.cpp_extension import load_inline\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    assert validate_candidate(base + snippet).backend_hint == backend


def test_it_prefers_the_gpu_backend_when_several_appear() -> None:
    snippet = "import triton\next = load_inline(name='a', cpp_sources='x', cuda_sources='y')\n"
    assert validate_candidate(CANDIDATE + snippet).backend_hint == "cuda"


@pytest.mark.parametrize("switch", [
    "with torch._C.DisableTorchFunction(), torch._C._ExcludeDispatchKeyGuard(keys):\n    pass",  # both records blind
    'cpp = "c10::impl::ExcludeDispatchKeyGuard guard(keys);"',  # in an extension's C++
    "checked = torch._C._len_torch_dispatch_stack() > 0",  # telling a checked call from a timed one
    "torch.ops.aten.zeros_like.default.py_impl(key)(kernel)",  # a Python kernel the Python dispatcher runs unseen
    "with torch._C._EnablePythonDispatcher():\n    pass",
])
def test_a_candidate_naming_one_of_pytorchs_dispatch_switches_is_refused_with_the_line(switch: str) -> None:
    source = CANDIDATE + f"\n\nkeys = None\n{switch}\n"
    errors = [i for i in validate_candidate(source).issues if i.severity == "error"]
    assert errors and all("dispatch keys or modes" in e.message for e in errors), errors
    assert {e.line for e in errors} == {source[:source.index(switch)].count("\n") + 1}


def test_a_candidate_without_dispatch_switches_is_not_refused_for_them() -> None:
    assert not [i for i in validate_candidate(CANDIDATE).issues if "dispatch keys" in i.message]
