"""The compilers and libraries a build runs with, detected once per process.

Detection never initialises CUDA: build workers and the preloaded sandbox parent fork children that
use the GPU later, and a parent that has touched the driver cannot hand a usable GPU to a fork. That is
why this module does not import `torch.utils.cpp_extension` (on a CUDA build of torch its import calls
`torch.cuda.is_available()`) and why the GPU arch is passed in or configured, never queried.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

# The GPU generation the studio's hosts run (H100); override per host with KSTUDIO_CUDA_ARCH.
DEFAULT_CUDA_ARCH = "9.0"
_ARCH = re.compile(r"^\d+\.\d+a?$")


@dataclass(frozen=True)
class Toolchain:
    """Everything that decides what a compile produces on this host."""

    torch_version: str
    torch_cuda: str | None  # CUDA version torch was built with; None for a CPU build of torch
    python: str  # "3.11"
    cxx: str  # the C++ compiler command, as torch's extensions use it ($CXX or c++)
    cxx_version: str  # first line of `cxx --version`
    cxx_std: str  # the -std= torch's JIT extensions use (c++17 up to torch 2.11, c++20 after)
    cxx11_abi: bool  # the _GLIBCXX_USE_CXX11_ABI torch was built with
    nvcc_version: str | None  # "13.0.88"; None when no CUDA toolkit was found
    cuda_home: str | None
    cuda_arch: str | None  # the one GPU arch CUDA code is compiled for ("9.0"); None without a toolkit
    torch_dir: str  # where torch is installed: its include/ and lib/ are used
    python_include: str  # where Python.h is

    # Paths differ between hosts that produce identical binaries; leaving them out lets hosts that
    # share a cache directory share entries.
    _NOT_FINGERPRINTED = ("cxx", "cuda_home", "torch_dir", "python_include")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def fingerprint(self) -> str:
        identity = {k: v for k, v in self.to_dict().items() if k not in self._NOT_FINGERPRINTED}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    @property
    def include_dir(self) -> Path:
        return Path(self.torch_dir) / "include"

    @property
    def lib_dir(self) -> Path:
        return Path(self.torch_dir) / "lib"

    @property
    def nvcc(self) -> Path | None:
        return Path(self.cuda_home) / "bin" / "nvcc" if self.cuda_home else None


def detect_toolchain(cuda_arch: str | None = None) -> Toolchain:
    """This host's toolchain, targeting `cuda_arch`, else $KSTUDIO_CUDA_ARCH, else "9.0"."""
    arch = cuda_arch or os.environ.get("KSTUDIO_CUDA_ARCH") or DEFAULT_CUDA_ARCH
    if not _ARCH.match(arch):
        raise ValueError(
            f"CUDA arch {arch!r} is not of the form '9.0' or '9.0a': set KSTUDIO_CUDA_ARCH (or pass "
            "cuda_arch) to the compute capability of this host's GPUs."
        )
    return _detect(arch)


@functools.cache
def _detect(arch: str) -> Toolchain:
    torch_dir = Path(torch.__file__).parent
    cxx = os.environ.get("CXX", "c++")  # what torch.utils.cpp_extension.get_cxx_compiler() picks
    cuda_home = find_cuda_home()
    nvcc_version = _nvcc_version(Path(cuda_home) / "bin" / "nvcc") if cuda_home else None
    return Toolchain(
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
        python=f"{sys.version_info.major}.{sys.version_info.minor}",
        cxx=cxx,
        cxx_version=_first_line([cxx, "--version"]),
        cxx_std=_torch_cxx_std(torch_dir),
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        nvcc_version=nvcc_version,
        cuda_home=cuda_home,
        cuda_arch=arch if cuda_home else None,
        torch_dir=str(torch_dir),
        python_include=sysconfig.get_path("include", scheme="posix_prefix"),
    )


def find_cuda_home() -> str | None:
    """CUDA_HOME / CUDA_PATH, else torch's own CUDA_HOME if already imported, else nvcc on PATH."""
    from_env = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if from_env:
        return from_env
    # Only read torch's answer when someone already paid for that import (see the module docstring).
    cpp_extension = sys.modules.get("torch.utils.cpp_extension")
    if cpp_extension is not None and cpp_extension.CUDA_HOME:
        return str(cpp_extension.CUDA_HOME)
    on_path = shutil.which("nvcc")
    if on_path is None:
        return None
    return str(resolve_nvcc(Path(on_path)).parent.parent)


def resolve_nvcc(path: Path) -> Path:
    """The real nvcc behind `path`, following symlinks and `exec .../nvcc "$@"` wrapper scripts.

    A wrapper's own directory is not a CUDA install: /usr/local/bin/nvcc here is a two-line script,
    and /usr/local would have no include/cuda_runtime.h.
    """
    real = path.resolve()
    with open(real, "rb") as handle:
        head = handle.read(4096)
    if not head.startswith(b"#!"):
        return real
    target = re.search(rb"exec\s+[\"']?(/\S+/nvcc)\b", head)
    if target is None:
        return real
    return resolve_nvcc(Path(target.group(1).decode()))


def _nvcc_version(nvcc: Path) -> str | None:
    if not nvcc.exists():
        return None
    found = re.search(r"release [\d.]+, V([\d.]+)", _run_text([str(nvcc), "--version"]))
    return found.group(1) if found else None


def _torch_cxx_std(torch_dir: Path) -> str:
    """The C++ standard torch's JIT extensions compile with, read from the installed torch's source.

    torch moved from c++17 to c++20 in 2.12; reading the file (not importing it, see the module
    docstring) keeps us identical to whatever torch a host has.
    """
    source = (torch_dir / "utils" / "cpp_extension.py").read_text()
    found = re.search(r"'-std=(c\+\+\d+)'", source)
    if found is None:
        raise RuntimeError(f"could not find the -std= flag in {torch_dir}/utils/cpp_extension.py")
    return found.group(1)


def _first_line(command: list[str]) -> str:
    return _run_text(command).strip().splitlines()[0]


def _run_text(command: list[str]) -> str:
    env = {**os.environ, "LC_ALL": "C"}  # compilers localise their banners
    return subprocess.run(command, capture_output=True, text=True, check=True, env=env).stdout
