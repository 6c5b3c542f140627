"""Channels-last convolutions (agent/builtin/layout.py): which buffers keep the layout, how their views are
addressed, the candidates' forward, and the engine's verdict on the variant (CPU here; nvcc for the CUDA source)."""
from __future__ import annotations

import pytest

from agent.builtin.codegen import Variant
from agent.builtin.graph import GraphPlan
from agent.builtin.layout import channels_last, physical_strides
from agent.builtin.lower import Leaf
from agent.builtin.policy import candidate_source, make_plan, variants
from agent.builtin.trace import trace_graph
from tests.agent.builtin.on_gpu import assert_every_cuda_variant_accepted
from tests.agent.builtin.test_graph import CONV3D_POINTWISE, CONV_EPILOGUE, CONV_POINTWISE, problem

# A convolution read by an elementwise epilogue and by a mean over its spatial dimensions (its CUDA is compiled in
# test_graph.py's nvcc test).
EPILOGUE = CONV_EPILOGUE
# A transposed 3D convolution with a GELU after it.
TRANSPOSED_3D = CONV3D_POINTWISE
# The convolution's output flattened across channels and space: no per-dimension view of the channels-last layout.
# (No bias in these two: a convolution's bias is added by a generated kernel after it, graph.conv_bias_view.)
FLATTENED = problem("return torch.cumsum(self.conv(x).flatten(1), dim=1)", "x|torch.randn(2, 4, 10, 12)",
                    members="self.conv = nn.Conv2d(4, 8, 3, bias=False)")
LONE = problem("return self.conv(x)", "x|torch.randn(2, 4, 10, 12)",
               members="self.conv = nn.Conv2d(4, 8, 3, bias=False)")
LAST = Variant("channels-last", layout="channels_last")
FULL = Variant("channels-last, full float32", layout="channels_last", tf32=False)


def _plan(evaluator, source: str) -> GraphPlan:
    plan = make_plan(trace_graph(evaluator, source))
    assert isinstance(plan, GraphPlan)
    return plan


def _leaves_of(plan: GraphPlan, source: str) -> list[Leaf]:
    from agent.builtin.layout import _kernel_leaves
    return [leaf for k in plan.kernels() for leaf in _kernel_leaves(k, []) if leaf.source == source]


def test_physical_strides_put_channels_innermost():
    assert physical_strides((2, 8, 10, 12)) == (960, 1, 96, 8)
    assert physical_strides((2, 6, 3, 4, 5)) == (360, 1, 120, 30, 6)


def test_an_epilogue_reads_the_convolution_output_in_place_at_its_channels_last_strides(evaluator):
    plan = _plan(evaluator, EPILOGUE)
    conv = plan.steps[0]
    shape = plan.buffers[conv.output][0]
    last = channels_last(plan)
    assert last.layouts == {conv.output: "channels_last"}
    read = _leaves_of(last, conv.output)
    assert read  # the elementwise read and the mean's
    for leaf in read:  # channel stride 1
        assert leaf.strides[1] in (0, 1) and leaf.strides == tuple(
            0 if n == 1 or s == 0 else p for n, s, p in zip(leaf.shape, leaf.strides, physical_strides(shape)))
    assert [v.layout for v in variants(plan, "cuda")] == ["default", "channels_last", "channels_last"]
    assert [v.layout for v in variants(plan, "cpu")] == ["default"]
    source = candidate_source(plan, variants(plan, "cuda")[1], "cuda")
    # Input (by our tiled kernel) and weight converted for cuDNN, the output kept in that layout for the kernels, which
    # check it.
    assert "torch.ops.aten.convolution(_ext.to_channels_last(arg0, " in source
    assert "ks_to_channels_last_kernel<<<grid, 256" in source and "'to_channels_last'" in source
    assert source.count(".contiguous(memory_format=torch.channels_last)") == 2
    assert "is_contiguous(at::MemoryFormat::ChannelsLast)" in source
    # The weight is made channels-last once, at construction (the per-call conversion is then a no-op).
    assert "_place(self, 'conv.weight', (8, 4, 3, 3), torch.float32, True, torch.channels_last)" in source
    default = candidate_source(plan, variants(plan, "cuda")[0], "cuda")
    assert "channels_last" not in default and "ChannelsLast" not in default


def test_a_view_across_the_channel_dimension_copies_the_output_back_to_row_major(evaluator):
    plan = _plan(evaluator, FLATTENED)
    last = channels_last(plan)
    assert last.layouts == {}
    source = candidate_source(plan, variants(plan, "cuda")[1], "cuda")
    assert source.count(".contiguous(memory_format=torch.channels_last)") == 1  # the weight only
    assert "is_contiguous(at::MemoryFormat::ChannelsLast)" not in source  # no kernel reads that layout


def test_a_lone_convolution_tries_channels_last_and_returns_pytorchs_default_layout(evaluator):
    plan = _plan(evaluator, LONE)
    found = variants(plan, "cuda")
    assert not plan.kernels() and [v.layout for v in found] == ["default", "channels_last", "channels_last"]
    assert [v.tf32 for v in found] == [True, True, False] and found[2].fallback
    source = candidate_source(plan, variants(plan, "cuda")[1], "cuda")
    assert source.count(".contiguous(memory_format=torch.channels_last)") == 1 and "_ext.to_channels_last(arg0" in source
    # The caller gets NCHW, as from the module itself: the convolution's own result is copied back.
    (call,) = [line for line in source.splitlines() if "torch.ops.aten.convolution(" in line]
    assert call.endswith(").contiguous()"), call


@pytest.mark.slow
@pytest.mark.parametrize("name, source, variant", [("epilogue", EPILOGUE, LAST), ("transposed_3d", TRANSPOSED_3D, LAST),
                                                   ("full_float32", EPILOGUE, FULL)])
def test_the_channels_last_variant_is_accepted_by_the_engine_on_the_cpu(evaluator, name, source, variant):
    plan = _plan(evaluator, source)
    assert channels_last(plan).layouts, "the variant must read a channels-last buffer in place to test that"
    verdict = evaluator.evaluate(source, candidate_source(plan, variant, "cpu"))
    assert verdict.accepted, (verdict.status, verdict.message)


def test_the_fallback_after_a_channels_last_variant_runs_the_convolution_in_full_float32(evaluator):
    """A TF32 convolution (cuDNN's choice on NHWC where PyTorch allows TF32) is outside float32's tolerance of a
    reference whose own kernel was plain float32 (KernelBench 2/57 on the H200): the fallback turns TF32 off around
    the call and restores the caller's setting, whatever the call does."""
    plan = _plan(evaluator, EPILOGUE)
    found = variants(plan, "cuda")
    assert [(v.tf32, v.fallback) for v in found] == [(True, False), (True, False), (False, True)]
    assert "full float32" in found[2].label
    source = candidate_source(plan, found[2], "cuda")
    forward = source.split("    def forward", 1)[1]
    assert ("        tf32 = torch.backends.cudnn.allow_tf32\n        torch.backends.cudnn.allow_tf32 = False\n"
            "        try:\n            t0 = torch.ops.aten.convolution(") in forward
    assert "        finally:\n            torch.backends.cudnn.allow_tf32 = tf32\n" in forward
    assert "allow_tf32" not in candidate_source(plan, found[1], "cuda")


def test_a_convolutions_elementwise_epilogue_on_a_gpu_is_a_whole_graph_with_a_channels_last_variant(evaluator):
    traced = trace_graph(evaluator, CONV_POINTWISE)
    assert not isinstance(make_plan(traced), GraphPlan)  # the single-kernel template on the CPU
    plan = make_plan(traced, "cuda")
    assert isinstance(plan, GraphPlan)
    assert [v.layout for v in variants(plan, "cuda")] == ["default", "channels_last", "channels_last"]


@pytest.mark.parametrize("name, source", [("2d", CONV_POINTWISE), ("transposed_3d", CONV3D_POINTWISE)])
def test_an_elementwise_epilogue_reads_the_channels_last_output_through_shared_memory_tiles(evaluator, name, source):
    plan = make_plan(trace_graph(evaluator, source), "cuda")
    tiled = candidate_source(plan, variants(plan, "cuda")[1], "cuda")
    # Loaded along the channels (consecutive in memory), stored along the positions (consecutive in the output).
    assert "__shared__ float tile0[32][33]" in tiled and "dim3(" in tiled
    assert "tile0[kk][tx] = ks_ld(p0[(n * " in tiled and "= tile0[tx][kk];" in tiled
    channels = plan.buffers[plan.steps[0].output][0][1]
    assert f"ch < {channels}u" in tiled
    default = candidate_source(plan, variants(plan, "cuda")[0], "cuda")
    assert "tile0" not in default


def test_only_reads_at_the_elements_own_coordinates_come_from_the_tile(evaluator):
    transposed = problem("y = self.conv(x)\nreturn y * y.transpose(2, 3)", "x|torch.randn(2, 4, 9, 9)",
                         members="self.conv = nn.Conv2d(4, 8, 3, bias=False)")
    plan = make_plan(trace_graph(evaluator, transposed), "cuda")
    assert isinstance(plan, GraphPlan) and channels_last(plan).layouts
    tiled = candidate_source(plan, variants(plan, "cuda")[1], "cuda")
    compute = tiled.split("__syncthreads();\n    for (unsigned kk", 1)[1]
    # y from the tile; y transposed read at its own (channels-last) strides from global memory.
    assert "= tile0[tx][kk];" in compute and "ks_ld(p0[n * 392LL + ch" in compute


@pytest.mark.parametrize("name, source", [("2d", CONV_POINTWISE), ("transposed_3d", CONV3D_POINTWISE)])
def test_the_tiled_channels_last_variant_is_accepted_on_the_gpu(evaluator, name, source):
    assert_every_cuda_variant_accepted(evaluator, source)
