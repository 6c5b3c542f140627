"""The NVRTC cache. libnvrtc is absent on CPU hosts, so a counting stand-in plays torch's compiler."""
from pathlib import Path

import pytest

from agent.engine.build.cache import BuildCache
from agent.engine.build.nvrtc import cached_nvrtc_compile

SOURCE = 'extern "C" __global__ void add(const float* a, float* b, int n) { int i = threadIdx.x; if (i < n) b[i] += a[i]; }'


class CountingCompile:
    """Stands in for torch.cuda._utils._nvrtc_compile: records each call, returns a fake binary."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def __call__(self, source, name, capability, include_dirs, options, **extra):  # type: ignore[no-untyped-def]
        self.calls.append((source, name, capability, include_dirs, options, extra))
        if "syntax error" in source:
            raise RuntimeError("Kernel compilation failed:\nsyntax error")
        return f"CUBIN<{name}@sm_{capability}>".encode() + b"\0binary", f"_Z3{name}"


@pytest.fixture
def compiler() -> CountingCompile:
    return CountingCompile()


def test_it_compiles_an_identical_source_only_once(tmp_path: Path, compiler: CountingCompile) -> None:
    compile = cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.0")
    first = compile(SOURCE, "add", "90", None, ["-O3"])
    second = compile(SOURCE, "add", "90", None, ["-O3"])
    assert first == second == (b"CUBIN<add@sm_90>\0binary", "_Z3add")
    assert len(compiler.calls) == 1
    assert compile.last_hit is True


def test_a_new_process_with_the_same_cache_does_not_compile_again(tmp_path: Path, compiler: CountingCompile) -> None:
    cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.0")(SOURCE, "add", "90")
    other = CountingCompile()
    assert cached_nvrtc_compile(BuildCache(tmp_path), other, nvrtc_version="13.0")(SOURCE, "add", "90")[1] == "_Z3add"
    assert other.calls == []


@pytest.mark.parametrize(
    "change",
    [
        {"kernel_source": SOURCE + "\n// edited"},
        {"kernel_name": "add2"},
        {"compute_capability": "80"},
        {"cuda_include_dirs": ["/opt/include"]},
        {"nvcc_options": ["-O3", "--use_fast_math"]},
    ],
)
def test_anything_that_changes_the_output_compiles_again(
    tmp_path: Path, compiler: CountingCompile, change: dict[str, object]
) -> None:
    compile = cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.0")
    base = {"kernel_source": SOURCE, "kernel_name": "add", "compute_capability": "90",
            "cuda_include_dirs": None, "nvcc_options": ["-O3"]}
    compile(**base)
    compile(**{**base, **change})
    assert len(compiler.calls) == 2


def test_another_nvrtc_version_compiles_again(tmp_path: Path, compiler: CountingCompile) -> None:
    cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.0")(SOURCE, "add", "90")
    cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.1")(SOURCE, "add", "90")
    assert len(compiler.calls) == 2


def test_the_current_device_is_resolved_before_keying(tmp_path: Path, compiler: CountingCompile) -> None:
    compile = cached_nvrtc_compile(
        BuildCache(tmp_path), compiler, nvrtc_version="13.0", current_capability=lambda: "90"
    )
    compile(SOURCE, "add")
    compile(SOURCE, "add", "90")
    assert [call[2] for call in compiler.calls] == ["90"]


def test_a_failed_compile_is_raised_and_not_cached(tmp_path: Path, compiler: CountingCompile) -> None:
    compile = cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.0")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="syntax error"):
            compile("syntax error", "add", "90")
    assert len(compiler.calls) == 2


def test_auto_pch_reaches_the_compiler_only_when_asked(tmp_path: Path, compiler: CountingCompile) -> None:
    compile = cached_nvrtc_compile(BuildCache(tmp_path), compiler, nvrtc_version="13.0")
    compile(SOURCE, "add", "90")
    compile(SOURCE + " ", "add", "90", auto_pch=True)
    assert [call[5] for call in compiler.calls] == [{}, {"auto_pch": True}]
