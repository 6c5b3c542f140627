"""Inline extensions, compiled for real. CPU builds link and run here; CUDA builds compile only
(this host's torch is a CPU build), so the CUDA tests are few, marked slow, and share a cache."""
import multiprocessing
import shlex
from pathlib import Path

import pytest
import torch

import agent.engine.build.inline as inline
from agent.engine.build import (
    BuildCache,
    ExtensionBuildError,
    InlineExtension,
    Toolchain,
    build_inline_extension,
    detect_toolchain,
    inline_key,
    load_built_extension,
)

SCALED_ADD = r"""
torch::Tensor scaled_add(torch::Tensor a, torch::Tensor b, double alpha) {
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b differ in shape");
    auto out = torch::empty_like(a);
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = a.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) po[i] = pa[i] + static_cast<float>(alpha) * pb[i];
    return out;
}
"""

# KernelBench's own example, as its prompts show it: <torch/extension.h> inside the CUDA source.
ADD_CU = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void elementwise_add_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = a[idx] + b[idx];
    }
}

torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    elementwise_add_kernel<<<num_blocks, block_size>>>(a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    return out;
}
"""
ADD_CPP = "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"


def scaled_add(name: str = "scaled_add", body: str = SCALED_ADD, cflags: tuple[str, ...] = ("-O3", "-fopenmp")) -> InlineExtension:
    return InlineExtension.from_load_inline(
        name=name, cpp_sources=body, functions=["scaled_add"], extra_cflags=list(cflags), extra_ldflags=["-fopenmp"]
    )


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return detect_toolchain("9.0")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> BuildCache:
    return BuildCache(tmp_path_factory.mktemp("build-cache"))


needs_nvcc = pytest.mark.skipif(detect_toolchain("9.0").nvcc is None, reason="no CUDA toolkit (nvcc) on this host")


def test_a_cpp_extension_with_openmp_builds_loads_and_matches_torch(toolchain: Toolchain, cache: BuildCache) -> None:
    built = build_inline_extension(scaled_add(), toolchain, cache)
    module = load_built_extension(built)
    a, b = torch.randn(10_000), torch.randn(10_000)
    torch.testing.assert_close(module.scaled_add(a, b, 0.5), a + 0.5 * b)
    assert built.cache_hit is False and built.so_path is not None
    assert module.__name__ == built.module_name == f"scaled_add_{built.key[:16]}"
    assert module.scaled_add.__doc__.rstrip().endswith("scaled_add")  # load_inline's docstring: the name
    assert built.fast_path == "slim"
    with pytest.raises(RuntimeError, match="differ in shape"):  # TORCH_CHECK becomes a Python error
        module.scaled_add(a, b[:10], 1.0)


def test_a_second_build_of_the_same_spec_is_a_hit_that_runs_no_compiler(
    toolchain: Toolchain, cache: BuildCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = build_inline_extension(scaled_add(), toolchain, cache)

    def no_compiler(command: list[str], cwd: Path) -> tuple[int, str, float]:
        raise AssertionError(f"a cache hit ran {command[0]}")

    monkeypatch.setattr(inline, "_run_compiler", no_compiler)
    again = build_inline_extension(scaled_add(), toolchain, cache)
    assert again.cache_hit is True
    assert (again.key, again.so_path, again.fast_path) == (first.key, first.so_path, first.fast_path)
    assert "main.cpp with slim headers: ok" in again.log


def test_a_different_flag_changes_the_key(toolchain: Toolchain) -> None:
    key = inline_key(scaled_add(), toolchain)
    assert inline_key(scaled_add(cflags=("-O2", "-fopenmp")), toolchain) != key
    assert inline_key(scaled_add(name="other"), toolchain) != key
    assert inline_key(scaled_add(), toolchain) == key
    # A CPU extension does not depend on the GPU it would never run on.
    assert inline_key(scaled_add(), detect_toolchain("8.0")) == key


def test_two_extensions_named_alike_load_side_by_side(toolchain: Toolchain, cache: BuildCache) -> None:
    doubled = SCALED_ADD.replace("pa[i] +", "2.0f * pa[i] +")
    first = load_built_extension(build_inline_extension(scaled_add(), toolchain, cache))
    second = load_built_extension(build_inline_extension(scaled_add(body=doubled), toolchain, cache))
    a, b = torch.ones(8), torch.ones(8)
    assert first.scaled_add(a, b, 1.0).tolist() == [2.0] * 8
    assert second.scaled_add(a, b, 1.0).tolist() == [3.0] * 8


def _build_in_child(root: str, results: "multiprocessing.Queue[tuple[bool, str]]") -> None:
    ext = scaled_add(name="raced", body=SCALED_ADD.replace("alpha", "beta"))
    built = build_inline_extension(ext, detect_toolchain("9.0"), BuildCache(Path(root)))
    results.put((built.cache_hit, str(built.so_path)))


def test_two_processes_building_one_extension_compile_it_once(tmp_path: Path) -> None:
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    children = [spawn.Process(target=_build_in_child, args=(str(tmp_path), results)) for _ in range(2)]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=300) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert sorted(hit for hit, _ in outcomes) == [False, True]
    assert len({so for _, so in outcomes}) == 1
    entries = [p for p in tmp_path.glob("*/*") if p.is_dir()]
    assert len(entries) == 1 and not list(tmp_path.glob("*/.*.tmp"))


def test_a_syntax_error_names_the_file_and_line(toolchain: Toolchain, cache: BuildCache) -> None:
    ext = InlineExtension.from_load_inline(
        name="broken", cpp_sources="int ok() { return 1; }\nint broken( { return 2; }", no_implicit_headers=True
    )
    with pytest.raises(ExtensionBuildError) as raised:
        build_inline_extension(ext, toolchain, cache)
    message = str(raised.value)
    assert "main.cpp:2:" in message and "error" in message
    assert "main.cpp:2:" in raised.value.log
    assert cache.lookup(inline_key(ext, toolchain)) is None


def test_an_invalid_name_is_refused_before_compiling(toolchain: Toolchain, cache: BuildCache) -> None:
    with pytest.raises(ExtensionBuildError, match="not a valid identifier"):
        build_inline_extension(scaled_add(name="my-ext"), toolchain, cache)


def test_generated_sources_are_those_load_inline_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "_jit_compile", lambda *args, **kwargs: None)  # write, do not build
    cpp_extension.load_inline(
        name="elementwise_add", cpp_sources=ADD_CPP, cuda_sources=ADD_CU, functions=["elementwise_add_cuda"],
        build_directory=str(tmp_path),
    )
    ext = InlineExtension.from_load_inline(
        name="elementwise_add", cpp_sources=ADD_CPP, cuda_sources=ADD_CU, functions=["elementwise_add_cuda"]
    )
    ours = {source.file: source.text for source in inline.generate_sources(ext)}
    assert ours == {"main.cpp": (tmp_path / "main.cpp").read_text(), "cuda.cu": (tmp_path / "cuda.cu").read_text()}


def _torch_ninja_flags(tmp_path: Path, ext: InlineExtension, module_name: str) -> dict[str, list[str]]:
    """The flag lines torch's own build.ninja would hold for `ext`."""
    from torch.utils import cpp_extension

    sources = [str(tmp_path / "main.cpp")] + ([str(tmp_path / "cuda.cu")] if ext.cuda_sources else [])
    ldflags = cpp_extension._prepare_ldflags(list(ext.extra_ldflags), ext.with_cuda, False, False, False)
    cpp_extension._write_ninja_file_to_build_library(
        path=str(tmp_path / "build.ninja"), name=module_name, sources=sources,
        extra_cflags=list(ext.extra_cflags), extra_cuda_cflags=list(ext.extra_cuda_cflags), extra_sycl_cflags=[],
        extra_ldflags=ldflags, extra_include_paths=list(ext.extra_include_paths), with_cuda=ext.with_cuda,
        with_sycl=False, is_standalone=False,
    )
    flags = {}
    for line in (tmp_path / "build.ninja").read_text().splitlines():
        name, _, value = line.partition(" = ")
        if name in ("cflags", "cuda_cflags", "ldflags"):
            flags[name] = shlex.split(value)
    return flags


def _ours(command: list[str], first: int) -> list[str]:
    """A compile line's flags, without the compiler, `-c SRC -o OBJ`, and our explicit ABI define
    (torch 2.13 leaves it to gcc's default, which it equals)."""
    return [f for f in command[first:-4] if not f.startswith("-D_GLIBCXX_USE_CXX11_ABI")]


def test_compile_and_link_flags_are_torchs(tmp_path: Path, toolchain: Toolchain, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "_launcher", lambda: [])  # ccache, if any, is a prefix, not a flag
    ext = InlineExtension.from_load_inline(
        name="flags", cpp_sources="", functions=[], extra_cflags=["-O3 -DX=1", ""], extra_ldflags=["-fopenmp"]
    )
    torch_flags = _torch_ninja_flags(tmp_path, ext, "flags_m")
    main = inline._Source("main.cpp", "")
    assert _ours(inline.compile_command(main, ext, toolchain, "flags_m", Path("main.o")), 1) == torch_flags["cflags"]
    link = inline.link_command(ext, toolchain, [Path("main.o")], Path("flags_m.so"))
    assert link[2:-2] == torch_flags["ldflags"]


@needs_nvcc
def test_cuda_compile_and_link_flags_are_torchs_for_the_target_arch(
    tmp_path: Path, toolchain: Toolchain, monkeypatch: pytest.MonkeyPatch
) -> None:
    from torch.utils import cpp_extension

    monkeypatch.setattr(inline, "_launcher", lambda: [])
    monkeypatch.setattr(cpp_extension, "CUDA_HOME", toolchain.cuda_home)  # a CPU torch leaves it unset
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", toolchain.cuda_arch)  # torch's way to a single arch
    monkeypatch.delenv("CC", raising=False)
    ext = InlineExtension.from_load_inline(
        name="flags", cpp_sources=ADD_CPP, cuda_sources=ADD_CU, extra_cuda_cflags=["-O3", "--use_fast_math"]
    )
    torch_flags = _torch_ninja_flags(tmp_path, ext, "flags_m")
    cuda = inline._Source("cuda.cu", "")
    ours = _ours(inline.compile_command(cuda, ext, toolchain, "flags_m", Path("cuda.cuda.o")), 1)
    assert ours == torch_flags["cuda_cflags"]
    main = inline._Source("main.cpp", "")
    assert _ours(inline.compile_command(main, ext, toolchain, "flags_m", Path("main.o")), 1) == torch_flags["cflags"]
    link = inline.link_command(ext, toolchain, [Path("main.o"), Path("cuda.cuda.o")], Path("flags_m.so"))
    assert link[3:-2] == torch_flags["ldflags"]
    assert inline.COMMON_NVCC_FLAGS == tuple(cpp_extension.COMMON_NVCC_FLAGS)


@pytest.mark.slow
@needs_nvcc
def test_a_cuda_extension_compiles_on_the_header_diet_and_is_reported_not_linked(
    toolchain: Toolchain, cache: BuildCache
) -> None:
    ext = InlineExtension.from_load_inline(
        name="elementwise_add", cpp_sources=ADD_CPP, cuda_sources=ADD_CU, functions=["elementwise_add_cuda"],
        extra_cflags=[""], extra_ldflags=[""],
    )
    built = build_inline_extension(ext, toolchain, cache)
    assert dict(built.headers) == {"main.cpp": "slim", "cuda.cu": "slim"}
    assert "-gencode=arch=compute_90,code=sm_90" in built.log
    if toolchain.torch_cuda is None:
        assert built.so_path is None and "not linked" in built.link_note
        assert (built.entry / "cuda.cuda.o").stat().st_size > 0
        with pytest.raises(ExtensionBuildError, match="cannot be loaded here"):
            load_built_extension(built)
    else:
        assert built.so_path is not None and built.so_path.is_file()
    if torch.cuda.is_available():  # a GPU host: it must also run
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        torch.testing.assert_close(load_built_extension(built).elementwise_add_cuda(a, b), a + b)


# Needs torch::autograd, which the slim prelude leaves out; torch/types.h (not the costlier
# torch/extension.h) keeps the fallback compile to ~20 s here.
NEEDS_AUTOGRAD_CU = r"""
#include <torch/types.h>

__global__ void twice_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

torch::Tensor twice(torch::Tensor x) {
    torch::autograd::Variable y = torch::empty_like(x);
    const int n = x.numel();
    twice_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""


@pytest.mark.slow
@needs_nvcc
def test_a_cuda_source_the_diet_cannot_serve_is_compiled_with_its_own_headers(
    toolchain: Toolchain, cache: BuildCache
) -> None:
    ext = InlineExtension.from_load_inline(
        name="twice", cpp_sources="#include <torch/extension.h>\ntorch::Tensor twice(torch::Tensor x);",
        cuda_sources=NEEDS_AUTOGRAD_CU, functions=["twice"], no_implicit_headers=True,
    )
    built = build_inline_extension(ext, toolchain, cache)
    assert dict(built.headers) == {"main.cpp": "slim", "cuda.cu": "original"}
    assert built.fast_path == "original"
    # Both attempts are in the log, the one that counts first.
    ok = built.log.index("cuda.cu with original headers: ok")
    failed = built.log.index("cuda.cu with slim headers: failed")
    assert ok < failed and 'has no member "Variable"' in built.log[failed:]


def test_sources_whose_meaning_the_diet_would_change_keep_their_headers(toolchain: Toolchain) -> None:
    def tiers(text: str) -> tuple[str, ...]:
        return inline.tiers_for(inline._Source("main.cpp", "#include <torch/extension.h>\n" + text), toolchain)

    assert tiers("auto t = torch::empty_like(x);") == ("slim", "original")
    # torch::tensor infers the default dtype where at::tensor would keep double; requires_grad and
    # from_blob differ between the torch:: and at:: factories too.
    assert tiers("auto t = torch::tensor({1.0, 2.0});") == ("original",)
    assert tiers("auto o = x.options().requires_grad(true);") == ("original",)
    assert tiers("auto t = torch::from_blob(p, {3});") == ("original",)
    # Nothing to slim down: compiled as written.
    assert inline.tiers_for(inline._Source("main.cpp", "int f() { return 1; }"), toolchain) == ("original",)


def test_the_prelude_includes_the_ops_a_source_calls_and_torchs_namespace(toolchain: Toolchain) -> None:
    source = inline._Source("cuda.cu", "auto y = torch::zeros_like(x); auto z = at::matmul(x, y); y.add_(z);")
    text = inline.prelude(source, toolchain)
    assert "#include <ATen/ops/zeros_like.h>" in text and "#include <ATen/ops/matmul.h>" in text
    assert "ops/add_.h" not in text  # a method call: Tensor declares it already
    assert "using namespace at;" in text and "kFloat32" in text
    assert "pybind" not in text  # only main.cpp binds


def test_a_compiler_that_hangs_is_killed_with_its_children(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "COMPILE_TIMEOUT_S", 1)
    code, output, seconds = inline._run_compiler(["sh", "-c", "sleep 30 & sleep 30"], tmp_path)
    assert code != 0 and "timed out" in output and seconds < 10
