import re

import pytest

from agent.builtin.codegen import candidate_source, index_expr, register_fit, variants
from agent.builtin.lower import Leaf, Plan
from agent.builtin.policy import make_plan
from agent.builtin.trace import trace_graph
from agent.engine.evaluate import EvalConfig, Evaluator
from tests.agent.builtin.test_graph import problem


def test_a_row_is_held_in_registers_only_when_it_splits_evenly_within_the_budget():
    assert register_fit(4096, 256, 4)  # 16 values a thread
    assert register_fit(32768, 1024, 1)  # 32 values a thread: the most a 1024-thread block may hold
    assert not register_fit(32768, 256, 4)  # 128 values a thread would spill
    assert not register_fit(1000, 256, 4)  # uneven: some threads would need bounds checks
    assert not register_fit(4096, 96, 1)  # not a whole number of warps


# A convolution's epilogue over maps whose rows are not a multiple of four long (KernelBench level 2's 126 x 126): a
# lower plan whose conv bias is broadcast per channel.
ODD_ROWS = problem("return torch.relu(self.conv(x)) * 2.0", "x|torch.randn(2, 4, 9, 9)",
                   members="self.conv = nn.Conv2d(4, 8, 3)")


def _odd_rows_plan(evaluator) -> Plan:
    plan = make_plan(trace_graph(evaluator, ODD_ROWS))
    assert isinstance(plan, Plan) and plan.shape == (2, 8, 7, 7)
    return plan


def test_rows_not_a_multiple_of_four_long_still_get_float4_groups_of_the_flat_index(evaluator):
    plan = _odd_rows_plan(evaluator)
    found = variants(plan, "cuda")
    assert [v.vec for v in found] == [4, 4, 1, 1] and "flat index" in found[0].label
    source = candidate_source(plan, found[0], "cuda")
    # The conv's output, laid out as the output, is one float4; the bias is read at each element's own channel.
    assert "*reinterpret_cast<const float4*>(&p0[0LL + i0])" in source
    for j in range(4):
        assert f"const unsigned r{j} = (unsigned)(i0 + {j}) / 7u" in source
        assert f"p1[((r{j} / 7u) % 8u) * 1LL]" in source
    assert "% 16) == 0) {" in source  # the scalar kernel where a base pointer is not 16-byte aligned


def test_a_broadcast_operands_index_uses_32_bit_divisions_where_every_index_fits(evaluator):
    plan = _odd_rows_plan(evaluator)
    scalar = candidate_source(plan, variants(plan, "cuda")[2], "cuda")
    assert "const unsigned r = (unsigned)(i) / 7u" in scalar and "p1[((r / 7u) % 8u) * 1LL]" in scalar
    assert not re.search(r"\(r / \d+LL\)|% \d+LL\)", scalar)  # no 64-bit division left on the per-element path
    per_channel = Leaf("x", (2, 8, 7, 7), (0, 1, 0, 0), 0)
    assert index_expr(per_channel, (2, 8, 7, 7), narrow=True) == "((r / 7u) % 8u) * 1LL"
    assert index_expr(per_channel, (2, 8, 7, 7)) == "((r / 7LL) % 8LL) * 1LL"  # where an index may pass 2**32


def test_the_flat_float4_variant_is_accepted_on_the_gpu(evaluator):
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run on the GPU box (benchmarks.md records it)")
    plan = _odd_rows_plan(evaluator)
    with Evaluator(EvalConfig(device="cuda", compile_baseline=False, min_rounds=2, max_rounds=3)) as gpu:
        for variant in variants(plan, "cuda")[::2]:  # flat float4, then scalar with 32-bit indices
            verdict = gpu.evaluate(ODD_ROWS, candidate_source(plan, variant, "cuda"))
            assert verdict.accepted, (variant.label, verdict.status, verdict.message)


_THREADS_SEEN = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <vector>

// How many of PyTorch's threads ran a chunk of an at::parallel_for compiled with the policy's CPU flags.
int64_t threads_seen(int64_t items) {
    std::vector<int> ran(at::get_num_threads(), 0);
    at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) { ran[at::get_thread_num()] = 1; });
    int64_t seen = 0;
    for (int r : ran) seen += r;
    return seen;
}
"""


def test_the_policys_cpu_kernels_run_on_pytorchs_own_threads_not_on_one_and_not_on_a_second_openmp(tmp_path):
    """at::parallel_for under PyTorch's OpenMP backend runs in parallel only where the extension is compiled with
    -fopenmp (its `omp parallel` is in a header): with -fopenmp-simd alone every kernel ran on one thread. The link
    must not bring a libgomp of its own: GOMP_parallel resolves to the runtime PyTorch ships."""
    import subprocess

    import torch
    from torch.utils.cpp_extension import load_inline

    from agent.builtin.codegen import CPU_CFLAGS

    ext = load_inline(name="ks_test_threads_seen", cpp_sources=_THREADS_SEEN, functions=["threads_seen"],
                      extra_cflags=list(CPU_CFLAGS), build_directory=str(tmp_path))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert ext.threads_seen(64) == 2
    finally:
        torch.set_num_threads(before)
    needed = subprocess.run(["readelf", "-d", ext.__file__], capture_output=True, text=True, check=True).stdout
    assert "libtorch_cpu" in needed and "gomp" not in needed, needed  # no second OpenMP runtime beside torch's
