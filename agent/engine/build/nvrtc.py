"""NVRTC compiles (`torch.cuda._compile_kernel`) through the build cache.

`torch.cuda._compile_kernel` calls `torch.cuda._utils._nvrtc_compile(kernel_source, kernel_name,
compute_capability, cuda_include_dirs, nvcc_options)`, which returns the kernel's CUBIN and its
lowered (mangled) name. The wrapper made here has that signature: the evaluation child swaps it in,
with torch's own function as `compile_fn`. Failed compiles raise through and are not stored.
"""
from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.engine.build.cache import BuildCache, CacheIntegrityError
from agent.engine.build.inline import ExtensionBuildError
from agent.engine.build.spec import NvrtcKernel, content_key

# Part of every key: bump it when what an entry holds changes.
NVRTC_FORMAT = "1"
BINARY = "kernel.bin"


def nvrtc_key(kernel: NvrtcKernel, nvrtc_version: str | None, torch_version: str) -> str:
    # torch adds its own flags and CUDA include dirs to every compile, so its version is part of it.
    return content_key("nvrtc", NVRTC_FORMAT, torch_version, nvrtc_version or "unknown", kernel.content())


class CachedNvrtcCompile:
    """A drop-in for torch's `_nvrtc_compile` that compiles each distinct request once per cache."""

    def __init__(
        self,
        cache: BuildCache,
        compile_fn: Callable[..., tuple[bytes, str]],
        nvrtc_version: str | None,
        current_capability: Callable[[], str],
    ) -> None:
        self.cache = cache
        self.compile_fn = compile_fn
        self.nvrtc_version = nvrtc_version
        self.current_capability = current_capability
        self.last_hit = False  # whether the latest call was served from the cache

    def __call__(
        self,
        kernel_source: str,
        kernel_name: str,
        compute_capability: str | None = None,
        cuda_include_dirs: list | None = None,
        nvcc_options: list | None = None,
        auto_pch: bool = False,  # torch >= 2.12: changes compile time, not the binary, so not keyed
    ) -> tuple[bytes, str]:
        import torch

        # Resolved before keying: "the current device" is not a key.
        capability = str(compute_capability) if compute_capability is not None else self.current_capability()
        kernel = NvrtcKernel(
            source=kernel_source,
            kernel_name=kernel_name,
            compute_capability=capability,
            include_dirs=_strings(cuda_include_dirs),
            options=_strings(nvcc_options),
        )

        def build(out: Path) -> dict[str, object]:
            extra = {"auto_pch": True} if auto_pch else {}  # torch 2.11's function has no such parameter
            binary, mangled = self.compile_fn(
                kernel_source, kernel_name, capability, cuda_include_dirs, nvcc_options, **extra
            )
            (out / BINARY).write_bytes(binary)
            return {"kind": "nvrtc", "kernel_name": kernel_name, "mangled_name": mangled, "bytes": len(binary)}

        key = nvrtc_key(kernel, self.nvrtc_version, torch.__version__)
        entry, self.last_hit = self.cache.get_or_build(key, build)
        built = self.cache.meta(key, entry)["built"]
        # Checked against the entry's manifest (agent/engine/build/cache.py): a changed binary is never launched.
        try:
            binary = self.cache.read_verified(entry, BINARY)
        except CacheIntegrityError as exc:
            raise ExtensionBuildError(f"the cached NVRTC build of kernel '{kernel_name}' (key {key[:16]}) failed its "
                                      f"integrity check and was not used: {exc}", "") from exc
        return binary, str(built["mangled_name"])


def cached_nvrtc_compile(
    cache: BuildCache,
    compile_fn: Callable[..., tuple[bytes, str]],
    nvrtc_version: str | None = None,
    current_capability: Callable[[], str] | None = None,
) -> CachedNvrtcCompile:
    """Wrap `compile_fn` (torch's `_nvrtc_compile`, same signature) with the build cache.

    `nvrtc_version` defaults to what libnvrtc reports (None where it cannot be loaded);
    `current_capability` answers for calls that leave the arch to the current device, as torch does.
    """
    version = nvrtc_version if nvrtc_version is not None else loaded_nvrtc_version()
    return CachedNvrtcCompile(cache, compile_fn, version, current_capability or _current_device_capability)


@functools.cache
def loaded_nvrtc_version() -> str | None:
    """"major.minor" of the libnvrtc torch would use, or None where there is none (CPU torch)."""
    import torch

    if torch.version.cuda is None:
        return None
    from torch.cuda._utils import _get_nvrtc_library

    try:
        library = _get_nvrtc_library()
    except OSError:
        return None
    major, minor = ctypes.c_int(), ctypes.c_int()
    library.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def _current_device_capability() -> str:
    """What torch's `_nvrtc_compile` targets when given no capability (the evaluation child has a GPU)."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return f"{props.major}{props.minor}"


def _strings(values: Sequence[object] | None) -> tuple[str, ...]:
    return tuple(str(v) for v in values or ())
