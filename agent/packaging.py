"""A verified kernel, handed out: as one standalone module, or as a small pip-installable package that
registers it as a `torch.library` custom op.

Plain Python (no Django): the studio fills `KernelFacts` from its library, a script could from a verdict.
The verified source goes out verbatim in both forms, so its sha256 still matches the one the verdict
was given for; what the export adds lives around it, marked as such.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from dataclasses import asdict, dataclass, field
from typing import Any

# torch.library op names: a namespace and an identifier.
_IDENT = re.compile(r"[^A-Za-z0-9_]+")


@dataclass
class KernelFacts:
    """What the export needs to know about a kernel; every field goes into the package's kstudio.json."""

    kernel_id: int = field(metadata={"help": "the kernel's id in the studio's library"})
    name: str = field(metadata={"help": "the kernel's display name"})
    problem_name: str = field(metadata={"help": "the problem module's name (e.g. 'silu_bias.py')"})
    problem_source: str = field(metadata={"help": "the reference module (KernelBench format), verbatim"})
    kernel_source: str = field(metadata={"help": "the verified candidate module (class ModelNew), verbatim"})
    model_name: str = field(default="Model", metadata={"help": "the reference's nn.Module class"})
    get_inputs_name: str = field(default="get_inputs", metadata={"help": "the reference's input function"})
    get_init_inputs_name: str = field(default="get_init_inputs", metadata={"help": "the reference's constructor-arguments function"})
    returns_sequence: bool = field(default=False, metadata={"help": "forward returns a tuple/list of tensors"})
    backend: str = field(default="", metadata={"help": "cpp, cuda, nvrtc, triton or python"})
    device: str = field(default="", metadata={"help": "the device it was verified on ('cpu' or 'cuda')"})
    produced_by: str = field(default="", metadata={"help": "the user whose run produced it"})
    policy: str = field(default="", metadata={"help": "the agent policy, or 'user' for a hand-written kernel"})
    model: str = field(default="", metadata={"help": "the LLM that wrote it, if any"})
    verified_at: str = field(default="", metadata={"help": "ISO time of the verification"})
    verification: dict[str, Any] = field(default_factory=dict, metadata={"help": "status, trials, flags, weights"})
    timing: dict[str, Any] = field(default_factory=dict, metadata={"help": "the verdict's timing (ms, speedups, clock)"})
    toolchain: dict[str, Any] = field(default_factory=dict, metadata={"help": "compiler and torch versions"})
    hardware: dict[str, Any] = field(default_factory=dict, metadata={"help": "CPU/GPU it was timed on"})
    studio_url: str = field(default="", metadata={"help": "the kernel's provenance page"})

    def __post_init__(self) -> None:
        if "class ModelNew" not in self.kernel_source:
            raise ValueError("kernel_source must define class ModelNew (the verified candidate module)")
        for attr in ("model_name", "get_inputs_name", "get_init_inputs_name"):
            if not getattr(self, attr).isidentifier():
                raise ValueError(f"{attr}={getattr(self, attr)!r} is not a Python identifier")
        if self.kernel_id < 1:
            raise ValueError(f"kernel_id={self.kernel_id}: a library kernel's id is positive")

    @property
    def stem(self) -> str:
        return _IDENT.sub("_", self.problem_name.removesuffix(".py")).strip("_").lower() or "kernel"

    @property
    def package(self) -> str:
        """The import name, also the op's name in the `kstudio` namespace."""
        name = f"kstudio_{self.stem}_{self.kernel_id}"
        return name if name[0].isalpha() else "k" + name

    @property
    def op_name(self) -> str:
        return f"kstudio::{self.package.removeprefix('kstudio_')}"

    def metadata(self) -> dict[str, Any]:
        """kstudio.json: the verification facts, with hashes of the sources as shipped."""
        facts = {k: v for k, v in asdict(self).items() if k not in ("problem_source", "kernel_source")}
        t = self.timing or {}
        facts.update(
            format=1, package=self.package, op=self.op_name,
            kernel_sha256=sha256(self.kernel_source), problem_sha256=sha256(self.problem_source),
            summary={"status": self.verification.get("status"), "trials": len(self.verification.get("trials") or []),
                     "flags": [f.get("flag") for f in self.verification.get("flags") or []],
                     "weights": self.verification.get("weights"),
                     "speedup_vs_eager": t.get("speedup_vs_eager"), "speedup_vs_compile": t.get("speedup_vs_compile"),
                     "candidate_ms": t.get("candidate_ms"), "eager_ms": t.get("eager_ms"), "compile_ms": t.get("compile_ms"),
                     "clock": t.get("clock")})
        return facts


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------------------- the module

def standalone_module(facts: KernelFacts) -> str:
    """One .py file: a provenance header (comments), the verified source verbatim, then a `load()`."""
    t = facts.timing or {}
    header = [
        f"# Kernel Studio kernel {facts.kernel_id}: {facts.name}",
        f"# Solves problem '{facts.problem_name}' (sha256 {sha256(facts.problem_source)}).",
        f"# Source sha256 {sha256(facts.kernel_source)} (the part between the markers below); backend {facts.backend}; "
        f"device {facts.device}.",
        f"# Produced by {facts.produced_by or 'a deleted user'} with policy '{facts.policy}'"
        + (f", model '{facts.model}'" if facts.model else "") + f"; verified {facts.verified_at}.",
    ]
    if t.get("candidate_ms") is not None:
        header.append(f"# Timing: {t['candidate_ms']:.4f} ms vs eager {t.get('eager_ms') or 0:.4f} ms "
                      f"({t.get('speedup_vs_eager') or 0:.2f}x), clock {t.get('clock', '?')}.")
    header.append("# Use: from this module import load; model = load(*init_inputs)  (the problem's get_init_inputs()).")
    footer = f'''# ---- end of the verified source; added by the Kernel Studio export ----
KSTUDIO_FACTS = {json.dumps(_short_facts(facts), indent=1, sort_keys=True)}


def load(*init_inputs):
    """ModelNew built with the problem's constructor arguments; its extension compiles on import."""
    return ModelNew(*init_inputs)
'''
    source = facts.kernel_source if facts.kernel_source.endswith("\n") else facts.kernel_source + "\n"
    return "\n".join(header) + "\n# ---- verified source ----\n" + source + footer


def _short_facts(facts: KernelFacts) -> dict[str, Any]:
    meta = facts.metadata()
    return {k: meta[k] for k in ("kernel_id", "name", "op", "kernel_sha256", "problem_sha256", "summary", "hardware",
                                 "toolchain", "verified_at", "studio_url")}


# -------------------------------------------------------------------------------------- the package

def package_zip(facts: KernelFacts) -> bytes:
    """A source tree `pip install`s straight from the zip: pyproject.toml (setuptools), the package with
    the kernel, the reference and kstudio.json, and a README with the facts in words."""
    root = f"{facts.package}-{package_version(facts)}"
    files = {
        "pyproject.toml": _pyproject(facts),
        "README.md": _readme(facts),
        f"src/{facts.package}/__init__.py": _init_py(facts),
        f"src/{facts.package}/kernel.py": facts.kernel_source,
        f"src/{facts.package}/reference.py": facts.problem_source,
        f"src/{facts.package}/kstudio.json": json.dumps(facts.metadata(), indent=2, sort_keys=True, default=str) + "\n",
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, text in files.items():
            # A fixed date: the same kernel always exports to the same bytes.
            info = zipfile.ZipInfo(f"{root}/{path}", date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, text)
    return buffer.getvalue()


def package_version(facts: KernelFacts) -> str:
    # The kernel's id makes each export distinct; the hash prefix ties the version to the verified source.
    return f"1.0.{facts.kernel_id}+sha{sha256(facts.kernel_source)[:10]}"


def zip_name(facts: KernelFacts) -> str:
    return f"{facts.package}-{package_version(facts).replace('+', '_')}.zip"


def _pyproject(facts: KernelFacts) -> str:
    s = facts.metadata()["summary"]
    speed = f"{s['speedup_vs_eager']:.2f}x over eager PyTorch" if s.get("speedup_vs_eager") else "not timed"
    description = (f"Kernel Studio kernel {facts.kernel_id} for {facts.problem_name}: {s.get('status')} after "
                   f"{s.get('trials')} trials, {speed} on {facts.hardware.get('gpu') or facts.hardware.get('host_cpu') or facts.device}")
    urls = f'\n[project.urls]\nProvenance = "{facts.studio_url}"\n' if facts.studio_url else ""
    return f'''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{facts.package.replace('_', '-')}"
version = "{package_version(facts)}"
description = {json.dumps(description)}
readme = "README.md"
requires-python = ">=3.10"
# The kernel JIT-builds with torch.utils.cpp_extension, which needs ninja and a C++ compiler (nvcc for CUDA).
dependencies = ["torch>=2.4", "ninja"]
keywords = ["kstudio", "torch.library", "{facts.backend}", "verified:{s.get('status')}", "kernel_sha256:{sha256(facts.kernel_source)}"]
{urls}
[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
{facts.package} = ["kstudio.json"]
'''


def _readme(facts: KernelFacts) -> str:
    s = facts.metadata()["summary"]
    return f"""# {facts.package}

The Kernel Studio kernel {facts.kernel_id} ("{facts.name}") for the problem `{facts.problem_name}`, registered as the
custom op `{facts.op_name}`.

```python
import {facts.package} as k
y = k.op(*inputs)          # torch.ops.{facts.op_name.replace('::', '.')}(list(inputs))
model = k.model()          # the ModelNew instance behind the op (load your own weights with load_state_dict)
```

The kernel builds on first use (torch.utils.cpp_extension; needs a C++ compiler{', and nvcc' if facts.backend == 'cuda' else ''}).
The op has no fake (meta) implementation, so it runs eagerly and `torch.compile` treats it as a graph break.

Verification: **{s.get('status')}** over {s.get('trials')} trials, weights {s.get('weights')}, flags
{', '.join(s.get('flags') or []) or 'none'}; timing {s.get('candidate_ms')} ms vs eager {s.get('eager_ms')} ms
(clock {s.get('clock')}). Sources: kernel sha256 `{sha256(facts.kernel_source)}`, problem sha256 `{sha256(facts.problem_source)}`.
Every fact is in `kstudio.json` inside the package (`{facts.package}.FACTS`).
"""


def _init_py(facts: KernelFacts) -> str:
    sequence = facts.returns_sequence
    ret = "list[torch.Tensor]" if sequence else "torch.Tensor"
    out = "list(result)" if sequence else "result"
    return f'''"""{facts.name}: Kernel Studio kernel {facts.kernel_id} as the torch.library custom op {facts.op_name}.

Verification facts (verdict summary, hardware, toolchain, speedups, source hashes) are in FACTS (kstudio.json).
"""
from __future__ import annotations

import importlib.util
import json
import sys
import threading
from pathlib import Path

import torch

_HERE = Path(__file__).resolve().parent
FACTS = json.loads((_HERE / "kstudio.json").read_text())
OP_NAME = "{facts.op_name}"
# The weights of a verification: the reference built under this seed, its state copied where names and
# shapes match (the verdict's "weights" says whether that was "copied" or "seeded").
SEED = 0

_lock = threading.Lock()
_model = None


def _import(name: str):
    qualified = f"{{__name__}}.{{name}}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, _HERE / f"{{name}}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)  # the kernel module JIT-builds its extension here
    return module


def init_inputs() -> list:
    return list(_import("reference").{facts.get_init_inputs_name}())


def example_inputs() -> list:
    return list(_import("reference").{facts.get_inputs_name}())


def model() -> torch.nn.Module:
    """The ModelNew behind the op, built once (its kernel compiles on first use), weights as verified."""
    global _model
    with _lock:
        if _model is None:
            args = init_inputs()
            torch.manual_seed(SEED)
            reference = getattr(_import("reference"), "{facts.model_name}")(*args)
            torch.manual_seed(SEED)
            candidate = _import("kernel").ModelNew(*args)
            theirs = reference.state_dict()
            ours = candidate.state_dict()
            if set(ours) == set(theirs) and all(ours[k].shape == theirs[k].shape for k in ours):
                candidate.load_state_dict(theirs)
            _model = candidate.eval()
        return _model


@torch.library.custom_op(OP_NAME, mutates_args=())
def _op(inputs: list[torch.Tensor]) -> {ret}:
    with torch.no_grad():
        result = model()(*inputs)
    return {out}


def op(*inputs: torch.Tensor):
    """Run the kernel: the same arguments as the problem's forward()."""
    if not all(isinstance(t, torch.Tensor) for t in inputs):
        raise TypeError(f"{{OP_NAME}} takes tensors only (got {{[type(t).__name__ for t in inputs]}}); "
                        "call model()(...) directly for other arguments")
    return torch.ops.{facts.op_name.replace("::", ".")}(list(inputs))
'''
