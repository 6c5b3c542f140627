"""The export of a verified kernel (agent/export/packaging.py): the standalone module, and the package that
installs with pip into a fresh virtualenv and registers a torch.library op giving the reference's results."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from agent.export.packaging import KernelFacts, package_zip, sha256, standalone_module, zip_name
from tests.apps.cast import GOOD_CANDIDATE, PROBLEM

VERIFICATION = {"status": "accepted", "stage": "done", "weights": "copied",
                "trials": [{"index": 0, "distribution": "problem", "passed": True, "max_abs_error": 1e-7}],
                "flags": [{"flag": "noisy_timing", "detail": "p10-p90 spread is 30% of the median"}]}
TIMING = {"candidate_ms": 0.5, "eager_ms": 1.0, "compile_ms": None, "speedup_vs_eager": 2.0, "speedup_vs_compile": None,
          "clock": "host"}


def facts(**overrides: object) -> KernelFacts:
    values = dict(kernel_id=7, name="silu bias (cpp)", problem_name="elementwise_silu_bias.py", problem_source=PROBLEM.read_text(),
                  kernel_source=GOOD_CANDIDATE.read_text(), backend="cpp", device="cpu", produced_by="owner", policy="builtin",
                  verified_at="2026-11-22 05:00 UTC", verification=VERIFICATION, timing=TIMING,
                  toolchain={"torch_version": "2.13.0+cpu", "cxx_version": "c++ 12.2.0"}, hardware={"host_cpu": "x86_64"},
                  studio_url="http://studio.example/kernels/7/")
    values.update(overrides)
    return KernelFacts(**values)


def test_it_refuses_facts_without_a_modelnew_or_with_a_bad_name():
    with pytest.raises(ValueError, match="class ModelNew"):
        facts(kernel_source="x = 1\n")
    with pytest.raises(ValueError, match="not a Python identifier"):
        facts(model_name="my model")


def test_it_keeps_the_verified_source_verbatim_in_the_standalone_module_and_adds_load(tmp_path):
    text = standalone_module(facts())
    verified = text.split("# ---- verified source ----\n", 1)[1].split("# ---- end of the verified source", 1)[0]
    assert verified == GOOD_CANDIDATE.read_text()
    assert sha256(GOOD_CANDIDATE.read_text()) in text
    compile(text, "exported.py", "exec")  # a module Python accepts, load() included
    assert "def load(*init_inputs)" in text and "'speedup_vs_eager': 2.0" in text


def test_it_writes_a_package_with_the_verification_facts_in_its_metadata():
    f = facts()
    with zipfile.ZipFile(io.BytesIO(package_zip(f))) as archive:
        names = archive.namelist()
        root = names[0].split("/")[0]
        meta = json.loads(archive.read(f"{root}/src/kstudio_elementwise_silu_bias_7/kstudio.json"))
        pyproject = archive.read(f"{root}/pyproject.toml").decode()
        kernel = archive.read(f"{root}/src/kstudio_elementwise_silu_bias_7/kernel.py").decode()
    assert kernel == GOOD_CANDIDATE.read_text()
    assert meta["op"] == "kstudio::elementwise_silu_bias_7" and meta["kernel_sha256"] == sha256(kernel)
    assert meta["summary"]["status"] == "accepted" and meta["summary"]["speedup_vs_eager"] == 2.0
    assert meta["summary"]["flags"] == ["noisy_timing"] and meta["hardware"] == {"host_cpu": "x86_64"}
    assert 'Provenance = "http://studio.example/kernels/7/"' in pyproject and "accepted after 1 trials" in pyproject
    assert zip_name(f).endswith(".zip") and package_zip(f) == package_zip(f), "the same kernel exports to the same bytes"


@pytest.mark.timeout(900)
def test_the_package_installs_in_a_fresh_virtualenv_and_its_op_matches_the_reference(tmp_path):
    """The zip installs with pip into a new virtualenv whose only link to this one is torch (and ninja): the site
    directory holding them is on its path (a .pth line, so nothing else of this checkout is set up there, and pip
    finds torch already satisfied instead of unpacking its 200 MB wheel again); the op JIT-builds the C++ kernel
    and is compared with the reference."""
    f = facts()
    archive = tmp_path / zip_name(f)
    archive.write_bytes(package_zip(f))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    import torch

    site = Path(torch.__file__).resolve().parents[1]
    [venv_site] = (venv / "lib").glob("python3*/site-packages")
    (venv_site / "outer_torch.pth").write_text(f"{site}\n")
    subprocess.run([*pip, str(archive)], check=True, timeout=300)
    check = tmp_path / "check.py"
    check.write_text(f'''
import importlib.util, json, torch
import kstudio_elementwise_silu_bias_7 as k
spec = importlib.util.spec_from_file_location("problem", {str(PROBLEM)!r})
problem = importlib.util.module_from_spec(spec); spec.loader.exec_module(problem)
torch.manual_seed(0)
reference = problem.Model(*problem.get_init_inputs())
torch.manual_seed(123)
x = problem.get_inputs()[0] * 3
with torch.no_grad():
    expected = reference(x)
got = k.op(x)
direct = torch.ops.kstudio.elementwise_silu_bias_7([x])
print(json.dumps({{"max_abs": (got - expected).abs().max().item(), "same_op": torch.equal(got, direct),
                  "shape": list(got.shape), "status": k.FACTS["summary"]["status"], "op": k.OP_NAME,
                  "site": k.__file__}}))
''')
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "extensions"), "PYTHONPATH": ""}
    done = subprocess.run([str(venv / "bin" / "python"), str(check)], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["site"].startswith(str(venv)), "imported from the fresh virtualenv, not from this checkout"
    assert result["shape"] == [1024, 1024] and result["same_op"] and result["op"] == "kstudio::elementwise_silu_bias_7"
    assert result["max_abs"] < 1e-5 and result["status"] == "accepted"


def test_an_exported_module_and_package_run_nothing_but_the_kernel_whatever_the_names(tmp_path):
    """Names with newlines, quotes, triple quotes, #, backslashes, NUL, carriage returns and bidirectional
    controls go into both exports as Python literals: importing them runs the kernel's module, never a payload
    hidden in a name, and the names come back exactly."""
    from tests.agent.export.hostile_exports import (hostile_texts, import_modules, install_and_import_packages,
                                             kernel_source)

    injected, kernel_ran = tmp_path / "injected", tmp_path / "kernel_ran"
    texts = hostile_texts(injected)
    exports = [facts(kernel_id=100 + i, name=text, problem_name=text, produced_by=text, model=text, backend=text,
                     hardware={"gpu": text, text: text}, toolchain={"torch_version": text}, studio_url=text,
                     timing={**TIMING, "clock": text, "candidate_ms": float("nan")},
                     kernel_source=kernel_source(kernel_ran))
               for i, text in enumerate(texts)]
    modules = []
    for f in exports:
        modules.append(tmp_path / f"module_{f.kernel_id}.py")
        modules[-1].write_text(standalone_module(f))
    module_facts = import_modules(modules, tmp_path)
    assert kernel_ran.exists() and not injected.exists(), "an exported module ran code from a name"
    assert [m["name"] for m in module_facts] == texts and [m["problem_name"] for m in module_facts] == texts
    assert [m["hardware"]["gpu"] for m in module_facts] == texts and module_facts[0]["summary"]["candidate_ms"] == "nan"

    kernel_ran.unlink()
    zips = []
    for f in exports:
        zips.append(tmp_path / zip_name(f))
        zips[-1].write_bytes(package_zip(f))
    found = install_and_import_packages(zips, [f.package for f in exports], tmp_path)
    assert kernel_ran.exists() and not injected.exists(), "an exported package ran code from a name"
    assert [p["NAME"] for p in found] == texts and [p["facts_name"] for p in found] == texts
    assert [p["OP_NAME"] for p in found] == [f.op_name for f in exports]


def test_a_problem_whose_name_starts_with_a_digit_gets_an_op_name_that_is_an_identifier():
    f = facts(problem_name="1d_conv.py")
    assert f.op_name == "kstudio::k1d_conv_7" and f.package == "kstudio_1d_conv_7"
    with zipfile.ZipFile(io.BytesIO(package_zip(f))) as archive:
        [init] = [n for n in archive.namelist() if n.endswith("__init__.py")]
        compile(archive.read(init).decode(), init, "exec")  # torch.ops.kstudio.1d_conv_7 would not compile


def test_the_readme_prints_rounded_figures_and_names_the_machine():
    import re

    timing = {**TIMING, "candidate_ms": 0.123456789, "eager_ms": 2.3456789, "speedup_vs_eager": 19.000123,
              "compile_ms": 1234.5678, "speedup_vs_compile": 10000.3}
    with zipfile.ZipFile(io.BytesIO(package_zip(facts(timing=timing, hardware={"host_cpu": "AMD EPYC 7R13", "cpu_count": 2})))) as z:
        readme = z.read(next(n for n in z.namelist() if n.endswith("README.md"))).decode()
    line = next(line for line in readme.splitlines() if line.startswith("Timing:"))
    assert "0.123 ms vs eager 2.35 ms (19.0x), torch.compile 1,235 ms (10,000x)" in line and "AMD EPYC 7R13, 2 cores" in line
    assert not re.search(r"\d\.\d{4,}", readme)
