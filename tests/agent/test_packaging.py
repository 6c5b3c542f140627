"""The export of a verified kernel (agent/packaging.py): the standalone module, and the package that
installs with pip into a fresh virtualenv and registers a torch.library op giving the reference's results."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile

import pytest

from agent.packaging import KernelFacts, package_zip, sha256, standalone_module, zip_name
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
    assert "def load(*init_inputs)" in text and '"speedup_vs_eager": 2.0' in text


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
    """pip installs torch into the new virtualenv from the machine's local wheel (/opt/wheels, as the
    project's own), then the zip; the op JIT-builds the C++ kernel and is compared with the reference."""
    f = facts()
    archive = tmp_path / zip_name(f)
    archive.write_bytes(package_zip(f))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    import torch

    torch_version = torch.__version__.split("+")[0]
    install = subprocess.run([*pip, f"torch=={torch_version}", "ninja"], capture_output=True, text=True, timeout=600)
    if install.returncode != 0:
        pytest.skip(f"torch=={torch_version} cannot be installed offline into a new virtualenv here: {install.stderr[-800:]}")
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
