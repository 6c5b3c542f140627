import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.engine.build.toolchain import detect_toolchain, find_cuda_home, resolve_nvcc


def _fake_cuda(root: Path) -> Path:
    """A CUDA install as far as detection looks: bin/nvcc under its root."""
    nvcc = root / "cuda-13.0" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_bytes(b"\x7fELF not really")
    nvcc.chmod(0o755)
    return nvcc


def _wrapper(directory: Path, target: Path) -> Path:
    """Like /usr/local/bin/nvcc on the dev box: a shell script that execs the real one."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "nvcc"
    script.write_text(f'#!/bin/sh\nexec {target} "$@"\n')
    script.chmod(0o755)
    return script


def test_it_follows_a_wrapper_script_to_the_real_nvcc(tmp_path: Path) -> None:
    real = _fake_cuda(tmp_path)
    assert resolve_nvcc(_wrapper(tmp_path / "bin", real)) == real.resolve()


def test_it_finds_cuda_home_from_the_nvcc_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _fake_cuda(tmp_path)
    wrappers = tmp_path / "bin"
    _wrapper(wrappers, real)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    # Another test may have imported it; on a CUDA build of torch it knows the real CUDA home.
    monkeypatch.delitem(sys.modules, "torch.utils.cpp_extension", raising=False)
    monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
    assert find_cuda_home() == str((tmp_path / "cuda-13.0").resolve())


def test_cuda_home_from_the_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", "/opt/my-cuda")
    assert find_cuda_home() == "/opt/my-cuda"


def test_the_arch_comes_from_the_environment_and_nonsense_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KSTUDIO_CUDA_ARCH", "8.0")
    toolchain = detect_toolchain()
    if toolchain.cuda_home is not None:
        assert toolchain.cuda_arch == "8.0"
    assert detect_toolchain("9.0a").cuda_arch in ("9.0a", None)
    monkeypatch.setenv("KSTUDIO_CUDA_ARCH", "sm_90")
    with pytest.raises(ValueError, match="KSTUDIO_CUDA_ARCH"):
        detect_toolchain()


def test_the_fingerprint_follows_versions_and_arch_but_not_install_paths() -> None:
    toolchain = detect_toolchain("9.0")
    moved = dataclasses.replace(toolchain, torch_dir="/elsewhere/torch", cuda_home="/elsewhere/cuda")
    assert moved.fingerprint() == toolchain.fingerprint()
    assert dataclasses.replace(toolchain, cuda_arch="8.0").fingerprint() != toolchain.fingerprint()
    assert dataclasses.replace(toolchain, torch_version="2.11.0").fingerprint() != toolchain.fingerprint()
    assert toolchain.to_dict()["torch_version"] == toolchain.torch_version


def test_detection_neither_initialises_cuda_nor_imports_cpp_extension() -> None:
    # In a fresh interpreter: this test process may have imported cpp_extension elsewhere.
    probe = (
        "import sys, torch\n"
        "from agent.engine.build.toolchain import detect_toolchain\n"
        "detect_toolchain()\n"
        "print(torch.cuda.is_initialized(), 'torch.utils.cpp_extension' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[4]
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
