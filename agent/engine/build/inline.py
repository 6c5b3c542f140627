"""`load_inline` extensions built as torch builds them, only faster, and never twice.

What is compiled matches `torch.utils.cpp_extension.load_inline` (KernelBench compatibility): the same
generated `main.cpp` (implicit `<torch/extension.h>`, the sources, a pybind11 binding per function) and
`cuda.cu` (implicit `<torch/types.h>`, `<cuda.h>`, `<cuda_runtime.h>`), the same defines and flags, the
same link line. Only the module name differs: it carries the content key, so two builds named alike
can be loaded in one process.

A cold `load_inline` spends nearly all of its minute parsing torch's headers (nvcc parses them three
times: cudafe++, cicc, the host gcc). The fast paths:

- Header diet: a source's `#include <torch/extension.h>` / `<torch/types.h>` lines are replaced, line
  for line (so error line numbers stay those of load_inline), by a slim prelude: `<ATen/core/Tensor.h>`,
  `<ATen/Dispatch.h>`, the per-operator header of each ATen op the source calls, pybind11 and torch's
  type casters for main.cpp, and torch/types.h's own `namespace torch {...}` block (`torch::` = `at::`
  plus the dtype constants). If that does not compile, the source is compiled as written, so the diet
  can cost time but never a build that load_inline would have accepted.
- Only the target GPU arch (`-gencode=arch=compute_90,code=sm_90`), not torch's list plus PTX.
- main.cpp and cuda.cu compile at once, in two processes; then one link.
- ccache, when it is on PATH, in front of both compilers (it then also serves an unchanged cuda.cu
  whose main.cpp changed, which our own cache, keyed on the whole request, cannot).

Measured on KernelBench's elementwise add (2-core dev box): cuda.cu 61 s as written, 21 s with
<ATen/ATen.h> instead, 13 s slim; main.cpp 16 s as written, 4.7 s slim. A gcc precompiled header of
torch/extension.h gave main.cpp 6.2 s, but costs 34 s and 785 MB per distinct flag set, so it was not
kept. On a 16-core H200 host (torch 2.11), a KernelBench leaderboard avg_pool2d candidate, cold: 41 s
with torch's load_inline, 40 s with only the arch and parallel paths, 10.9 s with the diet too. There,
7 of 8 typical candidates compiled slim (host-side tensor arithmetic, `x * 2 + 1`, fell back), and every
one computed bit-identical outputs to its build with the original headers.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

from agent.engine.build.cache import BuildCache, CacheIntegrityError
from agent.engine.build.spec import InlineExtension, content_key
from agent.engine.build.toolchain import Toolchain
from agent.engine.verdict import LOG_CAP_BYTES

# Part of every key: bump it when generated sources, flags or the entry layout change.
BUILDER_VERSION = "2"  # 2: entries carry a sha256 manifest and are installed by the trusted side only
# A cold compile with torch/extension.h takes about a minute; beyond this, a template bomb.
COMPILE_TIMEOUT_S = 300
# torch.utils.cpp_extension.COMMON_NVCC_FLAGS, unchanged from torch 2.0 to 2.13 (a test compares).
COMMON_NVCC_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)
# Header sets a source is tried with, fastest first; "original" is the source as load_inline has it.
TIERS = ("slim", "original")
PRELUDE = "kstudio_prelude.h"

_TORCH_INCLUDE = re.compile(
    r'^[ \t]*#[ \t]*include[ \t]*[<"]torch/(?:extension|types)\.h[>"][ \t]*(?://.*)?$', re.M
)
# What would compile under the diet but mean something else: `torch::tensor({1.0})` takes the default
# dtype where `at::tensor` keeps double, and the torch:: factories honour requires_grad where the at::
# ones do not. Sources that mention these keep their headers.
_DIET_UNSAFE = re.compile(r"\btensor\s*\(|\bfrom_blob\b|\brequires_grad\b")
# Free-function calls (not `x.f(` or `p->f(`): candidates for an ATen per-operator header.
_CALL = re.compile(r"(?<![\w.])(?<!->)([a-z_][a-z0-9_]*)\s*\(")
_PARALLEL = re.compile(r"\bparallel_(?:for|reduce)\b|\bomp_\w+\s*\(|\b(?:get|set)_num(?:_interop)?_threads\b")
_INDEXING = re.compile(r"\bindexing\s*::|\bSlice\s*\(")
_ERROR = re.compile(r"\berror\b|undefined reference|cannot find -l", re.I)


@dataclass(frozen=True)
class BuiltExtension:
    key: str
    module_name: str
    so_path: Path | None  # None when this host can compile but not link it (see link_note)
    cache_hit: bool
    seconds: float  # this call's wall time: near zero on a cache hit
    fast_path: str  # the header set the slowest-served source needed: "slim" or "original"
    log: str  # compiler output, capped
    link_note: str = ""
    build_seconds: float = 0.0  # what the build took when it ran
    headers: tuple[tuple[str, str], ...] = ()  # (source file, header set it compiled with)
    entry: Path | None = None


class ExtensionBuildError(Exception):
    """The candidate's sources did not compile or link; `log` holds the compiler output."""

    def __init__(self, message: str, log: str) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class _Source:
    file: str  # "main.cpp" or "cuda.cu", the names load_inline writes
    text: str

    @property
    def is_cuda(self) -> bool:
        return self.file.endswith(".cu")

    @property
    def object_name(self) -> str:
        return "cuda.cuda.o" if self.is_cuda else "main.o"


@dataclass(frozen=True)
class _Attempt:
    source: _Source
    tier: str
    ok: bool
    object_path: Path
    command: list[str]
    output: str
    seconds: float


def inline_key(ext: InlineExtension, toolchain: Toolchain) -> str:
    if not ext.with_cuda:
        # A CPU extension does not depend on the CUDA toolkit or the GPU: share it across them.
        toolchain = replace(toolchain, nvcc_version=None, cuda_home=None, cuda_arch=None)
    return content_key("inline-extension", BUILDER_VERSION, ext.content(), toolchain.fingerprint())


def module_name_for(ext: InlineExtension, key: str) -> str:
    return f"{ext.name}_{key[:16]}"


def build_inline_extension(ext: InlineExtension, toolchain: Toolchain, cache: BuildCache) -> BuiltExtension:
    started = time.monotonic()
    if not ext.name.isidentifier():
        raise ExtensionBuildError(
            f"extension name {ext.name!r} is not a valid identifier: it becomes the Python module's name", ""
        )
    if ext.with_cuda and toolchain.cuda_home is None:
        # Not the candidate's mistake: this host cannot build what every GPU host can.
        raise RuntimeError("no CUDA toolkit found on this host: set CUDA_HOME or put nvcc on PATH")
    key = inline_key(ext, toolchain)
    module_name = module_name_for(ext, key)
    entry, hit = cache.get_or_build(key, lambda out: _build(ext, toolchain, module_name, out))
    meta = cache.meta(key, entry)
    built = meta["built"]
    so_name = built["so"]
    return BuiltExtension(
        key=key,
        module_name=module_name,
        so_path=entry / so_name if so_name else None,
        cache_hit=hit,
        seconds=round(time.monotonic() - started, 3),
        fast_path=built["fast_path"],
        log=_cap((entry / "build.log").read_text()),
        link_note=built["link_note"],
        build_seconds=meta["seconds"],
        headers=tuple((file, tier) for file, tier in built["headers"]),
        entry=entry,
    )


def compile_extension(ext: InlineExtension, toolchain: Toolchain, out: Path) -> dict[str, object]:
    """Compile (and link, where this host can) `ext` into the empty directory `out`: what a build job runs,
    the files it leaves there being installed by the trusted parent (BuildCache.install). Raises
    ExtensionBuildError when the sources do not compile."""
    if not ext.name.isidentifier():
        raise ExtensionBuildError(
            f"extension name {ext.name!r} is not a valid identifier: it becomes the Python module's name", ""
        )
    if ext.with_cuda and toolchain.cuda_home is None:
        raise RuntimeError("no CUDA toolkit found on this host: set CUDA_HOME or put nvcc on PATH")
    return _build(ext, toolchain, module_name_for(ext, inline_key(ext, toolchain)), out)


def load_built_extension(built: BuiltExtension) -> ModuleType:
    """Import the built module (the name it was compiled with is its init symbol).

    The shared object's bytes are checked against the sha256 its cache entry's manifest recorded, and the
    checked bytes are what is loaded (a private copy): a file changed after it was installed, or swapped
    between the check and the load, is never loaded. Jobs cannot write the cache (it is read-only to them),
    so this guards against anything else that could: another host's writer, a bug, the disk."""
    if built.so_path is None:
        raise ExtensionBuildError(f"extension {built.module_name} cannot be loaded here: {built.link_note}", built.log)
    import tempfile

    import torch  # noqa: F401  (loads libtorch & co., which the extension links against)

    path = built.so_path
    if built.entry is not None:
        try:
            data = BuildCache(built.entry.parent.parent).read_verified(built.entry, built.so_path.name)
        except CacheIntegrityError as exc:
            raise ExtensionBuildError(
                f"the cached build of extension '{built.module_name}' (key {built.key[:16]}) failed its integrity "
                f"check and was not loaded: {exc}. The trusted side rebuilds it on the next evaluation.", built.log
            ) from exc
        path = Path(tempfile.mkdtemp(prefix="kstudio-ext-")) / built.so_path.name
        path.write_bytes(data)
    spec = importlib.util.spec_from_file_location(built.module_name, path)
    assert spec is not None and spec.loader is not None, built.so_path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module



def generate_sources(ext: InlineExtension) -> list[_Source]:
    """main.cpp and cuda.cu, exactly as load_inline writes them."""
    cpp = list(ext.cpp_sources)
    if not ext.no_implicit_headers:
        cpp.insert(0, "#include <torch/extension.h>")
    if ext.functions is not None:
        cpp.append("PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {")
        for name, doc in ext.functions:
            # load_inline documents a function given by list with its own name; the spec stores that as "".
            cpp.append(f'm.def("{name}", torch::wrap_pybind_function({name}), "{doc or name}");')
        cpp.append("}")
    sources = [_Source("main.cpp", "\n".join(cpp))]
    if ext.cuda_sources:
        cuda = list(ext.cuda_sources)
        if not ext.no_implicit_headers:
            cuda = ["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", *cuda]
        sources.append(_Source("cuda.cu", "\n".join(cuda)))
    return sources


def tiers_for(source: _Source, toolchain: Toolchain) -> tuple[str, ...]:
    """The header sets worth trying: the diet only where there is a torch header to replace."""
    if not _TORCH_INCLUDE.search(source.text) or _DIET_UNSAFE.search(source.text):
        return ("original",)
    if _torch_namespace(toolchain.torch_dir) is None:
        return ("original",)
    return TIERS


def prelude(source: _Source, toolchain: Toolchain) -> str:
    """The slim stand-in for torch/extension.h and torch/types.h, fitted to what `source` calls."""
    lines = [
        "// Kernel Studio header diet: stands in for <torch/extension.h> and <torch/types.h>.",
        "#pragma once",
        "#include <ATen/core/Tensor.h>",
        "#include <ATen/Dispatch.h>",
    ]
    if _PARALLEL.search(source.text):
        lines.append("#include <ATen/Parallel.h>")
    if _INDEXING.search(source.text):
        lines.append("#include <ATen/TensorIndexing.h>")
    ops = _aten_ops(toolchain.torch_dir)
    called = sorted({name for name in _CALL.findall(source.text) if name in ops})
    lines += [f"#include <ATen/ops/{name}.h>" for name in called]
    if not source.is_cuda:
        # torch's pybind11 type casters (all of them live here) and wrap_pybind_function.
        lines += ["#include <torch/csrc/utils/pybind.h>", "#include <torch/csrc/Exceptions.h>"]
    namespace = _torch_namespace(toolchain.torch_dir)
    assert namespace is not None  # tiers_for() offers the diet only when it was found
    lines.append(namespace)
    return "\n".join(lines) + "\n"


def compile_command(
    source: _Source, ext: InlineExtension, toolchain: Toolchain, module_name: str, obj: Path
) -> list[str]:
    """The compiler line torch's ninja file would run (torch/utils/cpp_extension.py, non-Windows)."""
    common = [f"-DTORCH_EXTENSION_NAME={module_name}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    # torch dropped this define once every wheel used the cxx11 ABI (gcc's default); explicit, it is
    # right for older wheels too and changes nothing for newer ones.
    common.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(toolchain.cxx11_abi)}")
    common += [f"-I{Path(p).absolute()}" for p in ext.extra_include_paths]
    for include in _system_includes(ext, toolchain):
        common += ["-isystem", include]
    if not source.is_cuda:
        flags = [*common, "-fPIC", f"-std={toolchain.cxx_std}", *_shell_split(ext.extra_cflags)]
        return [*_launcher(), toolchain.cxx, *flags, "-c", source.file, "-o", str(obj)]
    cuda_flags = _shell_split(ext.extra_cuda_cflags)
    flags = [*common, *COMMON_NVCC_FLAGS, *_arch_flags(cuda_flags, toolchain), "--compiler-options", "-fPIC"]
    flags += cuda_flags
    if not any(flag.startswith("-std=") for flag in flags):
        flags.append(f"-std={toolchain.cxx_std}")
    nvcc = [str(toolchain.nvcc)]
    cc = os.environ.get("CC")
    if cc:
        nvcc += ["-ccbin", cc]
    return [*_launcher(), *nvcc, *flags, "-c", source.file, "-o", str(obj)]


def link_command(ext: InlineExtension, toolchain: Toolchain, objects: list[Path], so: Path) -> list[str]:
    ldflags = ["-shared", *_shell_split(ext.extra_ldflags), f"-L{toolchain.lib_dir}", "-lc10"]
    if ext.with_cuda:
        ldflags.append("-lc10_cuda")
    ldflags.append("-ltorch_cpu")
    if ext.with_cuda:
        ldflags.append("-ltorch_cuda")
    ldflags += ["-ltorch", "-ltorch_python"]
    if ext.with_cuda:
        assert toolchain.cuda_home is not None
        cuda_lib = Path(toolchain.cuda_home) / "lib64"
        if not cuda_lib.exists() and (Path(toolchain.cuda_home) / "lib").exists():
            cuda_lib = Path(toolchain.cuda_home) / "lib"
        ldflags += [f"-L{cuda_lib}", "-lcudart"]
    return [toolchain.cxx, *map(str, objects), *ldflags, "-o", str(so)]


def _build(ext: InlineExtension, toolchain: Toolchain, module_name: str, out: Path) -> dict[str, object]:
    sources = generate_sources(ext)
    for source in sources:
        (out / source.file).write_text(source.text)  # for whoever inspects the entry
    with ThreadPoolExecutor(max_workers=len(sources)) as pool:
        attempts = list(pool.map(lambda s: _compile_with_fallback(s, ext, toolchain, module_name, out), sources))
    finals = [tried[-1] for tried in attempts]
    log = "\n".join(_describe(tried) for tried in attempts)
    failed = [a for a in finals if not a.ok]
    if failed:
        raise ExtensionBuildError(_failure_message(ext.name, failed[0]), _cap(log))
    objects = []
    for attempt in finals:
        objects.append(out / attempt.source.object_name)
        attempt.object_path.rename(objects[-1])
    so_name, link_note, log = _link(ext, toolchain, module_name, objects, out, log)
    for attempt_dir in out.glob("attempt-*"):
        shutil.rmtree(attempt_dir)
    (out / "build.log").write_text(log)
    tiers = [a.tier for a in finals]
    return {
        "kind": "inline_extension",
        "name": ext.name,
        "module": module_name,
        "so": so_name,
        "link_note": link_note,
        "fast_path": max(tiers, key=TIERS.index),
        "headers": [[a.source.file, a.tier] for a in finals],
        "compile_seconds": {a.source.file: a.seconds for a in finals},
    }


def _link(
    ext: InlineExtension, toolchain: Toolchain, module_name: str, objects: list[Path], out: Path, log: str
) -> tuple[str | None, str, str]:
    """(shared object's file name or None, why it was not linked, log so far plus the link's)."""
    if ext.with_cuda and toolchain.torch_cuda is None:
        note = (
            f"compiled, not linked: torch {toolchain.torch_version} here is a CPU build without "
            "c10_cuda/torch_cuda, so a CUDA extension can be compiled but not linked or loaded on this host"
        )
        return None, note, f"{log}\n=== link skipped: {note}\n"
    so = out / f"{module_name}.so"
    # Relative to the build dir, which is renamed once built: logs should not name a dead path.
    command = link_command(ext, toolchain, [o.relative_to(out) for o in objects], Path(so.name))
    code, output, seconds = _run_compiler(command, out)
    log = f"{log}\n=== link {'ok' if code == 0 else 'failed'} in {seconds:.1f} s\n$ {shlex.join(command)}\n{output}"
    if code != 0:
        raise ExtensionBuildError(_first_errors(f"linking extension '{ext.name}' failed", output), _cap(log))
    for obj in objects:
        obj.unlink()  # linked into the .so; nothing reads them again
    return so.name, "", log


def _compile_with_fallback(
    source: _Source, ext: InlineExtension, toolchain: Toolchain, module_name: str, out: Path
) -> list[_Attempt]:
    tried: list[_Attempt] = []
    for tier in tiers_for(source, toolchain):
        tried.append(_compile(source, tier, ext, toolchain, module_name, out))
        if tried[-1].ok:
            break
    return tried


def _compile(
    source: _Source, tier: str, ext: InlineExtension, toolchain: Toolchain, module_name: str, out: Path
) -> _Attempt:
    # Each attempt in its own directory, under the source's own file name, so that messages read
    # "cuda.cu(12): error" whichever header set was in use.
    workdir = out / f"attempt-{source.file}-{tier}"
    workdir.mkdir()
    text = source.text
    if tier == "slim":
        (workdir / PRELUDE).write_text(prelude(source, toolchain))
        text = _TORCH_INCLUDE.sub(f'#include "{PRELUDE}"', text)
    (workdir / source.file).write_text(text)
    obj = workdir / source.object_name
    command = compile_command(source, ext, toolchain, module_name, Path(source.object_name))
    code, output, seconds = _run_compiler(command, workdir)
    output = output.replace(f"{workdir}/", "").replace(f"{out}/", "")
    return _Attempt(source, tier, code == 0, obj, command, output, seconds)


def _run_compiler(command: list[str], cwd: Path) -> tuple[int, str, float]:
    """(exit status, stdout and stderr together, seconds)."""
    env = None
    if command[0] == "ccache":
        # Every build runs in a fresh temp dir: make ccache see paths relative to it.
        env = {**os.environ, "CCACHE_BASEDIR": str(cwd), "CCACHE_NOHASHDIR": "1"}
    started = time.monotonic()
    # Its own process group: nvcc runs cudafe++, cicc and gcc as children, which a timeout must end too.
    with subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    ) as proc:
        try:
            output, _ = proc.communicate(timeout=COMPILE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            output += f"\ncompiler timed out after {COMPILE_TIMEOUT_S} s"
    return proc.returncode, output, time.monotonic() - started


def _describe(tried: list[_Attempt]) -> str:
    """The log for one source: the attempt that counts first, then what was tried before it."""
    parts = []
    for attempt in reversed(tried):
        status = "ok" if attempt.ok else "failed"
        header = f"=== {attempt.source.file} with {attempt.tier} headers: {status} in {attempt.seconds:.1f} s"
        parts.append(f"{header}\n$ {shlex.join(attempt.command)}\n{attempt.output}")
    return "\n".join(parts)


def _failure_message(name: str, attempt: _Attempt) -> str:
    return _first_errors(f"compiling {attempt.source.file} of extension '{name}' failed", attempt.output)


def _first_errors(headline: str, output: str, limit: int = 20) -> str:
    errors = [line for line in output.splitlines() if _ERROR.search(line)][:limit]
    if not errors:  # say something even when the compiler's wording escapes the pattern
        errors = output.strip().splitlines()[-limit:]
    return headline + ":\n" + "\n".join(errors)


def _cap(log: str) -> str:
    data = log.encode()
    if len(data) <= LOG_CAP_BYTES:
        return log
    return data[:LOG_CAP_BYTES].decode(errors="ignore") + "\n... (log truncated)"


def _system_includes(ext: InlineExtension, toolchain: Toolchain) -> list[str]:
    """torch.utils.cpp_extension.include_paths("cuda" or "cpu") plus Python's include dir."""
    includes = [str(toolchain.include_dir), str(toolchain.include_dir / "torch" / "csrc" / "api" / "include")]
    if ext.with_cuda and toolchain.cuda_home is not None:
        cuda_include = str(Path(toolchain.cuda_home) / "include")
        if cuda_include != "/usr/include":  # gcc dislikes the system dir passed explicitly
            includes.append(cuda_include)
    return [*includes, toolchain.python_include]


def _arch_flags(user_cuda_flags: list[str], toolchain: Toolchain) -> list[str]:
    # Like torch: a user who chose archs gets exactly theirs.
    if any("arch" in flag for flag in user_cuda_flags if "TORCH_EXTENSION_NAME" not in flag):
        return []
    assert toolchain.cuda_arch is not None
    number = toolchain.cuda_arch.replace(".", "")
    return [f"-gencode=arch=compute_{number},code=sm_{number}"]


def _shell_split(flags: tuple[str, ...]) -> list[str]:
    """Flags as torch's ninja file hands them to the shell: stripped, joined by spaces, re-split.

    So `extra_cflags=[""]` adds nothing and `["-O3 -DX=1"]` adds two flags, as with load_inline.
    """
    return shlex.split(" ".join(flag.strip() for flag in flags))


def _launcher() -> list[str]:
    return ["ccache"] if shutil.which("ccache") else []


@functools.cache
def _aten_ops(torch_dir: str) -> frozenset[str]:
    return frozenset(path.stem for path in (Path(torch_dir) / "include" / "ATen" / "ops").glob("*.h"))


@functools.cache
def _torch_namespace(torch_dir: str) -> str | None:
    """torch/types.h's `namespace torch { using namespace at; ... dtype constants }`, verbatim."""
    types_h = Path(torch_dir) / "include" / "torch" / "csrc" / "api" / "include" / "torch" / "types.h"
    found = re.search(r"^namespace torch \{.*?^\} // namespace torch", types_h.read_text(), re.S | re.M)
    return found.group(0) if found else None
