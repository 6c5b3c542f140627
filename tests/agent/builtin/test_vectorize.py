"""Block reductions reading four floats at a time (agent/builtin/vectorize.py and its loops in gcodegen.py): which
operands qualify, and the CUDA source of each variant. The loops compile in test_graph.py's nvcc test (its first
variant) and run in its GPU test."""
from __future__ import annotations

import pytest

from agent.builtin.graph import GraphPlan, Kernel, plan_graph
from agent.builtin.policy import candidate_source, variants
from agent.builtin.trace import trace_graph
from agent.builtin.vectorize import vector_reads
from tests.agent.builtin.test_graph import SCANS, problem

TWO = "a, b|torch.randn(64, 4096), torch.randn(64, 4096)"


def _graph(evaluator, source: str) -> GraphPlan:
    """The whole-graph plan (the policy plans simple modules with lower.py's single kernel instead)."""
    return plan_graph(trace_graph(evaluator, source))


def _reduction(evaluator, forward: str, inputs: str = TWO) -> tuple[GraphPlan, Kernel]:
    plan = _graph(evaluator, problem(forward, inputs))
    reduce = next(k for k in plan.kernels() if k.kind == "reduce")
    return plan, reduce


def _types(plan: GraphPlan) -> dict[str, str]:
    names = [f"input:{i}" for i in range(len(plan.inputs))] + list(plan.buffers) + [f"state:{s['name']}" for s in plan.state]
    return {n: {"float32": "float", "float16": "__half"}.get(plan.base_info(n)[1], "other") for n in names}


def test_a_loss_over_whole_tensors_reads_both_operands_four_at_a_time(evaluator):
    plan, reduce = _reduction(evaluator, "return torch.mean((a - b) ** 2)")
    assert [leaf.source for leaf in vector_reads(reduce, _types(plan))] == ["input:0", "input:1"]
    first, _, last = variants(plan, "cuda")
    assert "float4" in candidate_source(plan, first, "cuda")
    assert "float4" not in candidate_source(plan, last, "cuda")  # the scalar variant every problem still has
    source = candidate_source(plan, first, "cuda")
    assert "reinterpret_cast<uintptr_t>(p0) % 16 == 0 && reinterpret_cast<uintptr_t>(p1) % 16 == 0" in source
    assert "float4" not in candidate_source(plan, first, "cpu")


def test_an_operand_broadcast_over_the_reduced_dimension_is_one_value_for_the_four(evaluator):
    plan, reduce = _reduction(evaluator, "return (a - b[:, :1]).abs().sum(dim=-1)")
    assert [leaf.source for leaf in vector_reads(reduce, _types(plan))] == ["input:0"]


@pytest.mark.parametrize("forward, inputs", [
    ("return (a.t() * 2.0).sum(dim=-1)", "a|torch.randn(4096, 64)"),  # a transposed read: consecutive j are 64 apart
    ("return (a * 2.0).sum(dim=-1)", "a|torch.randn(64, 4095)"),  # rows not a multiple of four long
    ("return (a[:, 1:] * 2.0).sum(dim=-1)", "a|torch.randn(64, 4097)"),  # rows starting one float off alignment
    ("return (a - a[:, :1]).sum(dim=-1)", "a|torch.randn(64, 4096)"),  # one source through two views
])
def test_reads_that_are_not_four_consecutive_aligned_floats_stay_scalar(evaluator, forward, inputs):
    plan, reduce = _reduction(evaluator, forward, inputs)
    assert vector_reads(reduce, _types(plan)) is None
    assert "float4" not in candidate_source(plan, variants(plan, "cuda")[0], "cuda")


def test_a_pointwise_kernel_writes_four_elements_per_thread_with_float4_where_aligned(evaluator):
    plan = _graph(evaluator, problem("return torch.relu(a) + b[:, :1]", TWO))
    assert [k.kind for k in plan.kernels()] == ["pointwise"]
    source = candidate_source(plan, variants(plan, "cuda")[0], "cuda")
    assert "const float4 ks_w0 = *reinterpret_cast<const float4*>(&p0[" in source  # a, not the broadcast column of b
    assert "make_float4(" in source and "ks_vec" in source
    assert "float4" not in candidate_source(plan, variants(plan, "cuda")[2], "cuda")
    transposed = _graph(evaluator, problem("return a.t() + 1.0", "a|torch.randn(4096, 64)"))
    source = candidate_source(transposed, variants(transposed, "cuda")[0], "cuda")
    assert "make_float4(" in source and "const float4 ks_w" not in source  # stored four at a time, read one at a time
    odd = _graph(evaluator, problem("return a * 2.0", "a|torch.randn(63, 4095)"))  # an odd number of elements
    assert "float4" not in candidate_source(odd, variants(odd, "cuda")[0], "cuda")


def test_a_float4_read_of_a_broadcast_operand_of_fewer_dimensions_takes_the_trailing_coordinates(evaluator):
    # A LayerNorm's [C, H, W] weight in an [N, C, H, W] kernel: read at (c, h, w). At (n, c, h) it was accepted on
    # the H200 while the engine judged norms at their default weights of ones and biases of zeros.
    plan = _graph(evaluator, problem("return F.layer_norm(x, (8, 16, 32), self.w, self.b)", "x|torch.randn(4, 8, 16, 32)",
                                     members="self.w = nn.Parameter(torch.rand(8, 16, 32))\n"
                                             "self.b = nn.Parameter(torch.rand(8, 16, 32))"))
    normalize = next(k for k in plan.kernels() if k.kind == "pointwise")
    assert normalize.shape == (4, 8, 16, 32)
    source = candidate_source(plan, variants(plan, "cuda")[0], "cuda")
    loads = [line.strip() for line in source.splitlines() if "const float4 ks_w" in line]
    # x's loads name the batch (c0, or the statistics kernel's k0); the weight's and bias's must not.
    weights = [load for load in loads if "c0" not in load and "k0" not in load]
    assert len(weights) == 2 and all(w.endswith("[c1 * 512LL + c2 * 32LL + c3]);") for w in weights), loads
    # The same in a reduction's lanes: a row's weights are read at j, whatever the row (k0).
    plan = _graph(evaluator, problem("return (a * self.w).sum(dim=-1)", "a|torch.randn(64, 4096)",
                                     members="self.w = nn.Parameter(torch.rand(4096))"))
    source = candidate_source(plan, variants(plan, "cuda")[0], "cuda")
    loads = [line.strip() for line in source.splitlines() if "const float4 ks_w" in line]
    assert any(load.endswith("[j]);") for load in loads) and any("k0 * 4096LL + j" in load for load in loads), loads


def test_rows_not_a_multiple_of_four_long_take_four_elements_of_the_flat_index_per_thread(evaluator):
    plan = _graph(evaluator, FLAT)
    source = candidate_source(plan, variants(plan, "cuda")[0], "cuda")
    # a is laid out as the elements: one float4 at 4i; b's column is read per element at each lane's own row.
    assert "const float4 ks_w0 = *reinterpret_cast<const float4*>(&p0[i * 4LL]);" in source
    for lane in range(4):
        assert f"const long long c{lane}_0 = ((unsigned)((i * 4LL + {lane})) / 4095u);" in source
        assert f"ks_ld(p1[c{lane}_0 * 4095LL])" in source
    assert "*reinterpret_cast<float4*>(&q0[i * 4LL]) = make_float4(" in source and "ks_vec" in source


def test_a_scan_along_lines_of_odd_length_takes_four_elements_a_thread_each_guarded(evaluator):
    plan = _graph(evaluator, problem("return torch.cumsum(x[:, 1:], dim=1)", "x|torch.randn(6, 3000)"))
    first, _, last = variants(plan, "cuda")
    source = candidate_source(plan, first, "cuda")
    assert "a1 = a0 + a1;" in source and "if (s + 3 < 2999LL) ks_st(" in source
    assert "float4" not in source  # the lines start at odd offsets: scalar loads, four a thread
    assert "a1 = a0 + a1;" not in candidate_source(plan, last, "cuda")  # the scalar variant keeps a tile of one each

# Rows of 4095: the four elements of a group straddle rows (gcodegen's flat float4 groups).
FLAT = problem("return torch.relu(a) * b[:, :1]", "a, b|torch.randn(64, 4095), torch.randn(64, 4095)")
# The vectorized variants judged by the engine on the GPU, each alone (the policy's own run would hide a rejected
# first variant behind an accepted scalar third one).
ON_GPU = {
    "flat": FLAT,
    "loss": problem("return torch.mean((a - b) ** 2)", "a, b|torch.randn(256, 4096), torch.randn(256, 4096)"),
    "layer_norm": problem("return F.layer_norm(x, (64, 256))", "x|torch.randn(16, 64, 256)"),
    "row_norm": problem("return x / x.abs().mean(dim=1, keepdim=True)", "x|torch.randn(64, 8192)"),
    "scans": SCANS,  # four elements per thread along each line: cumsum, cumprod, reversed, masked
    "epilogue": problem("return torch.tanh(self.conv(x)) * self.scale", "x|torch.randn(4, 8, 34, 34)",
                        members="self.conv = nn.Conv2d(8, 16, 3)\nself.scale = nn.Parameter(torch.rand(16, 1, 1))"),
}


@pytest.mark.parametrize("name", sorted(ON_GPU))
def test_the_float4_variants_are_accepted_on_the_gpu(evaluator, name):
    import torch
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run on the GPU box (benchmarks.md records it)")
    from agent.engine.evaluate import EvalConfig, Evaluator
    plan = _graph(evaluator, ON_GPU[name])
    # The first two variants load four floats at a time, except a convolution plan's second: channels-last, its
    # epilogue reads the convolution's output through shared-memory tiles (test_layout.py judges that one).
    four = [v for v in variants(plan, "cuda")[:2] if "float4" in candidate_source(plan, v, "cuda")]
    assert len(four) == (1 if name == "epilogue" else 2)
    with Evaluator(EvalConfig(device="cuda", compile_baseline=False, min_rounds=2, max_rounds=3)) as gpu:
        for variant in four:
            verdict = gpu.evaluate(ON_GPU[name], candidate_source(plan, variant, "cuda"))
            assert verdict.accepted, (variant.label, verdict.status, verdict.message)
