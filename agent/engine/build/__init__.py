"""Compiling candidates' kernels: once per distinct request, shared by every worker on a host."""
from agent.engine.build.cache import BuildCache, default_cache_root
from agent.engine.build.inline import (
    BuiltExtension,
    ExtensionBuildError,
    build_inline_extension,
    inline_key,
    load_built_extension,
)
from agent.engine.build.nvrtc import CachedNvrtcCompile, cached_nvrtc_compile, nvrtc_key
from agent.engine.build.spec import InlineExtension, NvrtcKernel, content_key
from agent.engine.build.toolchain import Toolchain, detect_toolchain

__all__ = [
    "BuildCache",
    "BuiltExtension",
    "CachedNvrtcCompile",
    "ExtensionBuildError",
    "InlineExtension",
    "NvrtcKernel",
    "Toolchain",
    "build_inline_extension",
    "cached_nvrtc_compile",
    "content_key",
    "default_cache_root",
    "detect_toolchain",
    "inline_key",
    "load_built_extension",
    "nvrtc_key",
]
