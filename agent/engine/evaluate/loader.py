"""Importing user modules inside the sandbox, with their kernel builds routed to our build cache.

A KernelBench candidate compiles at import time (`load_inline`, `torch.cuda._compile_kernel`). In
the sandboxed child we replace those entry points: an identical request is served from the
content-addressed cache, so the build job (on any CPU host) and the GPU evaluation share one build.

The cache is read-only here (the sandbox binds it so, and the router's BuildCache never writes): an entry is
installed by the trusted parent only, and every binary is checked against its entry's sha256 manifest
before it is loaded. A request that is not cached is compiled into this job's private /tmp and used by this
job alone, or, in the build's discovery job (`defer_misses`), only reported for the parent to build.
"""
from __future__ import annotations

import sys
import tempfile
import time
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


from agent.engine.build.cache import BuildCache
from agent.engine.build.inline import BuiltExtension, build_inline_extension, inline_key, load_built_extension
from agent.engine.build.nvrtc import cached_nvrtc_compile
from agent.engine.build.spec import InlineExtension
from agent.engine.build.toolchain import Toolchain


def exec_module(source: str, name: str, filename: str) -> types.ModuleType:
    """Run a user module's source as a module named `name` (registered, so classes pickle).

    The source is written to a real file first (in the job's private /tmp): Triton's @jit and
    anything else that calls inspect.getsource needs the module's file to exist."""
    path = Path(tempfile.mkdtemp(prefix="kstudio-src-")) / filename
    path.write_text(source)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102 - inside the sandbox only
    return module


class Unloadable:
    """Stands in for an extension built on a host that cannot load it (a CPU-only build host)."""

    def __init__(self, name: str, reason: str) -> None:
        self._name, self._reason = name, reason

    def __getattr__(self, attr: str) -> Any:
        raise RuntimeError(f"extension {self._name!r} was built but cannot be loaded here: {self._reason}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"kernel {self._name!r} was compiled but cannot be launched here: {self._reason}")


@dataclass
class BuildRecord:
    kind: str  # "load_inline" or "nvrtc"
    name: str
    key: str = ""
    cache_hit: bool = False
    seconds: float = 0.0
    fast_path: str = ""
    linked: bool = True
    log: str = ""
    spec: dict[str, Any] | None = None  # the request itself, as data, where the parent is to build it
    deferred: bool = False  # not compiled here: the parent builds it (defer_misses)


class UnbuiltExtension(BaseException):
    """An extension the trusted side has not built: raised where it is requested, so that the job reports it (the
    request as data) and the parent builds it and runs the evaluation again."""

    def __init__(self, name: str, spec: dict[str, Any]) -> None:
        super().__init__(f"extension '{name}' was requested after the module's import (in __init__ or forward), so the "
                         "build step did not compile it; the evaluation builds it and starts again")
        self.name, self.spec = name, spec


@dataclass
class ExtensionRouter:
    """Replaces the compile entry points for the rest of this (sandboxed) process."""

    toolchain: Toolchain
    cache: BuildCache
    loadable: bool
    """False on a build host that cannot load what it builds (no GPU): imports get stand-ins."""
    records: list[BuildRecord] = field(default_factory=list)
    defer_misses: bool = False
    """The build's discovery job: an uncached load_inline request is reported (with its spec), not compiled."""
    refuse_misses: bool = False
    """The candidate's job: an uncached request (one made after the import, in __init__ or forward, which the discovery
    job never saw) is not compiled here but raised as UnbuiltExtension, for the trusted side to build and install
    (the binaries it installs are the only ones it reads for what they call: build/native_calls.py)."""
    known: frozenset[str] = frozenset()
    """With refuse_misses: the keys this evaluation's build step installed or found, the only ones loaded as they are
    (a binary cached for another evaluation is asked of the trusted side too, so that it is read for this one)."""

    def __post_init__(self) -> None:
        # Inside a job the shared cache is never written: misses are built privately (BuildCache.read_only).
        self.cache = replace_cache_read_only(self.cache)

    def install(self) -> None:
        # Imported here, in the child: importing cpp_extension asks torch.cuda.is_available(),
        # which poisons every later fork of the importing process (the zygote) for CUDA.
        import torch.utils.cpp_extension

        torch.utils.cpp_extension.load_inline = self.load_inline
        import torch.cuda._utils as cuda_utils

        original = cuda_utils._nvrtc_compile
        cached = cached_nvrtc_compile(self.cache, original)

        def nvrtc_compile(kernel_source: str, kernel_name: str, compute_capability: str | None = None,
                          *args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            capability = compute_capability or self.toolchain.cuda_arch.replace(".", "")
            out = cached(kernel_source, kernel_name, capability, *args, **kwargs)
            self.records.append(BuildRecord("nvrtc", kernel_name, seconds=time.monotonic() - started,
                                            cache_hit=getattr(cached, "last_hit", False)))
            return out

        cuda_utils._nvrtc_compile = nvrtc_compile
        if not self.loadable:
            torch.cuda._compile_kernel = self._compile_kernel_without_gpu

    def load_inline(self, name: str, cpp_sources: Any, cuda_sources: Any = None, *args: Any, **kwargs: Any) -> Any:
        spec = InlineExtension.from_load_inline(name, cpp_sources, cuda_sources, *args, **kwargs)
        key = inline_key(spec, self.toolchain) if self.defer_misses or self.refuse_misses else ""
        if self.defer_misses:
            if self.cache.lookup(key) is None:
                self.records.append(BuildRecord("load_inline", name, key, spec=spec.to_dict(), linked=False, deferred=True))
                return Unloadable(name, "not built yet: the trusted side builds it after this import")
        if self.refuse_misses and (key not in self.known or self.cache.lookup(key) is None):
            self.records.append(BuildRecord("load_inline", name, spec=spec.to_dict(), linked=False, deferred=True))
            raise UnbuiltExtension(name, spec.to_dict())
        built: BuiltExtension = build_inline_extension(spec, self.toolchain, self.cache)
        self.records.append(BuildRecord("load_inline", name, built.key, built.cache_hit, built.seconds,
                                        built.fast_path, built.so_path is not None, built.log,
                                        spec=spec.to_dict() if self.defer_misses else None))
        if built.so_path is None or not self.loadable:
            return Unloadable(name, built.link_note or "this build host has no GPU")
        return load_built_extension(built)

    def _compile_kernel_without_gpu(self, kernel_source: str, kernel_name: str, compute_capability: str | None = None,
                                    cuda_include_dirs: list | None = None, nvcc_options: list | None = None) -> Any:
        import torch.cuda._utils as cuda_utils

        try:
            cuda_utils._nvrtc_compile(kernel_source, kernel_name, compute_capability, cuda_include_dirs, nvcc_options)
        except OSError as exc:  # no libnvrtc on this build host: the GPU worker compiles (0.4 s)
            self.records.append(BuildRecord("nvrtc", kernel_name, linked=False, log=f"deferred to the GPU worker: {exc}"))
        return Unloadable(kernel_name, "no GPU on the build host")

    def report(self) -> list[dict[str, Any]]:
        return [asdict(r) for r in self.records]


def replace_cache_read_only(cache: BuildCache) -> BuildCache:
    return cache if cache.read_only else BuildCache(cache.root, cache.lock_timeout, read_only=True)


def cache_root_from(path: str | None) -> Path:
    from agent.engine.build.cache import default_cache_root

    return Path(path) if path else default_cache_root()
