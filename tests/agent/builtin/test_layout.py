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
from tests.agent.builtin.test_graph import CONV_EPILOGUE, problem

# A convolution read by an elementwise epilogue and by a mean over its spatial dimensions (its CUDA is compiled in
# test_graph.py's nvcc test).
EPILOGUE = CONV_EPILOGUE
# A transposed 3D convolution with a GELU after it.
TRANSPOSED_3D = problem("return F.gelu(self.conv(x)) * 0.5", "x|torch.randn(2, 3, 5, 6, 7)",
                        members="self.conv = nn.ConvTranspose3d(3, 6, 3, stride=2, padding=1)")
# The convolution's output flattened across channels and space: no per-dimension view of the channels-last layout.
# (No bias in these two: a convolution's bias is added by a generated kernel after it, graph.conv_bias_view.)
FLATTENED = problem("return torch.cumsum(self.conv(x).flatten(1), dim=1)", "x|torch.randn(2, 4, 10, 12)",
                    members="self.conv = nn.Conv2d(4, 8, 3, bias=False)")
LONE = problem("return self.conv(x)", "x|torch.randn(2, 4, 10, 12)",
               members="self.conv = nn.Conv2d(4, 8, 3, bias=False)")
LAST = Variant("channels-last", layout="channels_last")


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
    # Input and weight converted for cuDNN, the output kept in that layout for the kernels, which check it.
    assert source.count(".contiguous(memory_format=torch.channels_last)") == 3
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
    assert source.count(".contiguous(memory_format=torch.channels_last)") == 2  # input and weight only
    assert "ChannelsLast" not in source


def test_a_lone_convolution_tries_channels_last_and_returns_pytorchs_default_layout(evaluator):
    plan = _plan(evaluator, LONE)
    assert not plan.kernels() and [v.layout for v in variants(plan, "cuda")] == ["default", "channels_last"]
    source = candidate_source(plan, variants(plan, "cuda")[1], "cuda")
    assert source.count(".contiguous(memory_format=torch.channels_last)") == 2
    # The caller gets NCHW, as from the module itself: the convolution's own result is copied back.
    (call,) = [line for line in source.splitlines() if "torch.ops.aten.convolution(" in line]
    assert call.endswith(").contiguous()"), call


@pytest.mark.slow
@pytest.mark.parametrize("name, source", [("epilogue", EPILOGUE), ("transposed_3d", TRANSPOSED_3D)])
def test_the_channels_last_variant_is_accepted_by_the_engine_on_the_cpu(evaluator, name, source):
    plan = _plan(evaluator, source)
    assert channels_last(plan).layouts, "the variant must read a channels-last buffer in place to test that"
    verdict = evaluator.evaluate(source, candidate_source(plan, LAST, "cpu"))
    assert verdict.accepted, (verdict.status, verdict.message)
