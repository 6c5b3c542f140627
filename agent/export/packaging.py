"""A verified kernel, handed out: as one standalone module, or as a small pip-installable package that
registers it as a `torch.library` custom op.

Plain Python (no Django): the studio fills `KernelFacts` from its library, a script could from a verdict.
The verified source goes out verbatim in both forms, so its sha256 still matches the one the verdict
was given for; what the export adds lives around it, marked as such.

Every text a user chose (the problem's and the kernel's names, user names) and every fact a verdict reported
(hardware, toolchain) reaches a generated Python file only as a Python literal (`_literal`: repr, checked with
ast.literal_eval), never spliced into a comment, a docstring or code: a problem named "x.py\nimport os; ..."
would otherwise run on the machine of whoever imports the export. The TOML and Markdown files get the same
texts escaped for their own syntax (`_toml`, `_markdown_literal`).
"""
from __future__ import annotations

import ast
import hashlib
import io
import json
import math
import pprint
import re
import zipfile
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.engine.hardware import describe

# torch.library op names: a namespace and an identifier.
_IDENT = re.compile(r"[^A-Za-z0-9_]+")
_URL = re.compile(r"https?://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]+")


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
        # At most 40 characters: the package's directory and zip names carry it.
        return _IDENT.sub("_", self.problem_name.removesuffix(".py"))[:40].strip("_").lower() or "kernel"

    @property
    def package(self) -> str:
        """The import name, also the op's name in the `kstudio` namespace."""
        name = f"kstudio_{self.stem}_{self.kernel_id}"
        return name if name[0].isalpha() else "k" + name

    @property
    def op_name(self) -> str:
        # An op's name is an identifier: a stem that starts with a digit ("1d_conv.py") gets a letter first.
        name = self.package.removeprefix("kstudio_")
        return f"kstudio::{name if name[0].isalpha() else 'k' + name}"

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
    """One .py file: a provenance header (comments holding only numbers and hashes), the verified source
    verbatim, then KSTUDIO_FACTS (Python literals: every name and text is there, never in a comment) and a
    `load()`."""
    header = [
        f"# Kernel Studio kernel {int(facts.kernel_id)}; its names, producer and verification facts are in "
        "KSTUDIO_FACTS at the end.",
        f"# Source sha256 {sha256(facts.kernel_source)} (the part between the markers below); "
        f"problem sha256 {sha256(facts.problem_source)}.",
        "# Use: from this module import load; model = load(*init_inputs)  (the problem's get_init_inputs()).",
    ]
    footer = f'''# ---- end of the verified source; added by the Kernel Studio export ----
KSTUDIO_FACTS = {_literal(_short_facts(facts))}


def load(*init_inputs):
    """ModelNew built with the problem's constructor arguments; its extension compiles on import."""
    return ModelNew(*init_inputs)
'''
    source = facts.kernel_source if facts.kernel_source.endswith("\n") else facts.kernel_source + "\n"
    return "\n".join(header) + "\n# ---- verified source ----\n" + source + footer


def _short_facts(facts: KernelFacts) -> dict[str, Any]:
    meta = facts.metadata()
    return {k: meta[k] for k in ("kernel_id", "name", "problem_name", "op", "kernel_sha256", "problem_sha256", "summary",
                                 "hardware", "toolchain", "produced_by", "policy", "model", "backend", "device",
                                 "verified_at", "studio_url")}


def _plain(value: Any) -> Any:
    """`value` as what a Python literal can hold: dicts with text keys, lists, text, finite numbers, booleans
    and None (a non-finite float becomes its name, anything else its str())."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def _literal(value: Any) -> str:
    """Python source that evaluates to `value` (made plain first) and can do nothing else: repr of strings
    escapes newlines, quotes, NUL and bidirectional controls, so no text ends the literal it sits in."""
    plain = _plain(value)
    text = pprint.pformat(plain, indent=1, width=110, sort_dicts=True)
    if ast.literal_eval(text) != plain:  # our bug, never the user's: refuse to write a module that differs
        raise ValueError("the export's facts do not survive as a Python literal")
    return text


def _toml(text: str) -> str:
    """A TOML basic string holding `text` on one line: printable characters only (no control, bidirectional
    or surrogate characters, no newline), backslashes and quotes escaped."""
    kept = "".join(c for c in str(text) if c.isprintable())
    return '"' + kept.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _markdown_literal(text: str) -> str:
    """`text` as its Python literal (one line: repr escapes every newline), for an indented code block."""
    return repr(str(text))


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
    eager = s.get("speedup_vs_eager")
    speed = f"{figure(eager)}x over eager PyTorch" if isinstance(eager, (int, float)) and eager else "not timed"
    description = (f"Kernel Studio kernel {facts.kernel_id} for {facts.problem_name}: {s.get('status')} after "
                   f"{s.get('trials')} trials, {speed} on {facts.hardware.get('gpu') or facts.hardware.get('host_cpu') or facts.device}")
    # Only a plain http(s) address goes in (setuptools refuses anything else as a URL).
    url = facts.studio_url if _URL.fullmatch(facts.studio_url) else ""
    urls = f'\n[project.urls]\nProvenance = {_toml(url)}\n' if url else ""
    return f'''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{facts.package.replace('_', '-')}"
version = "{package_version(facts)}"
description = {_toml(description)}
readme = "README.md"
requires-python = ">=3.10"
# The kernel JIT-builds with torch.utils.cpp_extension, which needs ninja and a C++ compiler (nvcc for CUDA).
dependencies = ["torch>=2.4", "ninja"]
keywords = ["kstudio", "torch.library", {_toml(facts.backend)}, {_toml(f"verified:{s.get('status')}")}, "kernel_sha256:{sha256(facts.kernel_source)}"]
{urls}
[tool.setuptools.packages.find]
where = ["src"]

[tool.setuptools.package-data]
{facts.package} = ["kstudio.json"]
'''


def _readme(facts: KernelFacts) -> str:
    s = facts.metadata()["summary"]
    # The names are user text: as Python literals in an indented code block (one line each, nothing to close).
    names = "\n".join(f"    {label} = {_markdown_literal(value)}" for label, value in (
        ("name", facts.name), ("problem", facts.problem_name), ("produced_by", facts.produced_by or "a deleted user")))
    flags = ", ".join(_markdown_literal(f) for f in s.get("flags") or []) or "none"
    return f"""# {facts.package}

Kernel Studio kernel {facts.kernel_id}, registered as the custom op `{facts.op_name}`:

{names}

```python
import {facts.package} as k
y = k.op(*inputs)          # the op {facts.op_name} on list(inputs)
model = k.model()          # the ModelNew instance behind the op (load your own weights with load_state_dict)
```

The kernel builds on first use (torch.utils.cpp_extension; needs a C++ compiler{', and nvcc' if facts.backend == 'cuda' else ''}).
The op has no fake (meta) implementation, so it runs eagerly and `torch.compile` treats it as a graph break.

Verification: {_markdown_literal(s.get('status'))} over {_markdown_literal(s.get('trials'))} trials; flags {flags}.
{_measured(facts)}
Sources: kernel sha256 `{sha256(facts.kernel_source)}`, problem sha256 `{sha256(facts.problem_source)}`.
Every fact (timing, weights, hardware, toolchain) is in `kstudio.json` inside the package (`{facts.package}.FACTS`).
"""


def figure(value: Any) -> str:
    """A measured number as a reader wants it: 3 significant figures (0.500, 17.1, 2.00), whole from 100 on."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:#.3g}"


def _measured(facts: KernelFacts) -> str:
    """The README's timing line, rounded (every digit is in kstudio.json)."""
    s = facts.metadata()["summary"]
    if s.get("candidate_ms") is None:
        return "Timing: not timed."
    line = f"Timing: {figure(s['candidate_ms'])} ms vs eager {figure(s.get('eager_ms'))} ms ({figure(s.get('speedup_vs_eager'))}x)"
    if s.get("compile_ms") is not None:
        line += f", torch.compile {figure(s['compile_ms'])} ms ({figure(s.get('speedup_vs_compile'))}x)"
    machine = describe(facts.hardware) if facts.hardware else facts.device
    return line + f" on {_markdown_literal(machine)} (clock: {_markdown_literal(s.get('clock'))})."


def _init_py(facts: KernelFacts) -> str:
    sequence = facts.returns_sequence
    ret = "list[torch.Tensor]" if sequence else "torch.Tensor"
    out = "list(result)" if sequence else "result"
    return f'''"""Kernel Studio kernel {int(facts.kernel_id)} as a torch.library custom op (OP_NAME).

Its name is NAME; the verification facts (verdict summary, hardware, toolchain, speedups, source hashes) are
in FACTS (kstudio.json).
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
NAME = {_literal(facts.name)}
OP_NAME = {_literal(facts.op_name)}
# The reference module's names for its model class and input functions.
_MODEL, _GET_INPUTS, _GET_INIT_INPUTS = {_literal([facts.model_name, facts.get_inputs_name, facts.get_init_inputs_name])}
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
    return list(getattr(_import("reference"), _GET_INIT_INPUTS)())


def example_inputs() -> list:
    return list(getattr(_import("reference"), _GET_INPUTS)())


def model() -> torch.nn.Module:
    """The ModelNew behind the op, built once (its kernel compiles on first use), weights as verified."""
    global _model
    with _lock:
        if _model is None:
            args = init_inputs()
            torch.manual_seed(SEED)
            reference = getattr(_import("reference"), _MODEL)(*args)
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
    namespace, name = OP_NAME.split("::")
    return getattr(getattr(torch.ops, namespace), name)(list(inputs))
'''
