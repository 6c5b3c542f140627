"""Planning from real traces (the sandbox job on meta tensors): what each pattern becomes, and the
honest refusals that name what is not supported."""
from __future__ import annotations

from pathlib import Path

import pytest

from agent.builtin.lower import Leaf, Unsupported, describe, lower
from agent.builtin.trace import trace_graph

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def plan_of(evaluator, source: str):
    return lower(trace_graph(evaluator, source))


@pytest.mark.parametrize("name, kind, ops, anchor", [
    ("relu_scale_bias", "pointwise", {"mul", "add", "relu"}, None),
    ("swiglu", "pointwise", {"silu", "mul"}, None),
    ("residual_layer_norm", "row", {"add", "layer_norm"}, None),
    ("row_sum", "row", {"sum"}, None),
    ("cross_entropy", "row", {"cross_entropy"}, None),
    ("linear_gelu", "pointwise", {"linear", "gelu"}, "linear"),
    ("conv2d_relu_bias", "pointwise", {"conv2d", "relu", "add"}, "conv2d"),
])
def test_it_plans_the_example_patterns(evaluator, name, kind, ops, anchor):
    plan = plan_of(evaluator, (EXAMPLES / f"{name}.py").read_text())
    assert plan.kind == kind and set(plan.ops) == ops
    assert (plan.anchor.kind if plan.anchor else None) == anchor
    assert "float32" in describe(plan)


def test_chunk_views_read_the_input_in_place(evaluator):
    plan = plan_of(evaluator, (EXAMPLES / "swiglu.py").read_text())
    leaves = plan.leaves()
    width = plan.input_shapes[0][-1]
    assert plan.bases() == ["input:0"] and len(leaves) == 2
    assert sorted(leaf.offset for leaf in leaves) == [0, width // 2]
    assert all(leaf.strides == (width, 1) for leaf in leaves)


def test_per_channel_bias_broadcasts_without_a_copy(evaluator):
    plan = plan_of(evaluator, (EXAMPLES / "conv2d_relu_bias.py").read_text())
    bias = next(leaf for leaf in plan.leaves() if leaf.source.startswith("state:") and len(leaf.shape) == 3)
    assert isinstance(bias, Leaf) and bias.shape[1:] == (1, 1)


def test_a_convolutions_own_bias_is_added_by_the_epilogue_and_not_by_the_library_call(evaluator):
    # On the GPU PyTorch adds it in a broadcast pass of its own over the whole output (graph.conv_bias_view).
    plan = plan_of(evaluator, (EXAMPLES / "conv2d_relu_bias.py").read_text())
    assert plan.anchor.kind == "conv2d" and plan.anchor.args[2] is None
    (bias,) = [leaf for leaf in plan.leaves() if leaf.source == "state:conv.bias"]
    assert bias.shape[1:] == (1, 1) and bias.strides == (1, 0, 0)
    without = plan_of(evaluator, (EXAMPLES / "conv2d_relu_bias.py").read_text().replace("padding=1)",
                                                                                      "padding=1, bias=False)"))
    assert not [leaf for leaf in without.leaves() if leaf.source == "state:conv.bias"]


UNSUPPORTED = {
    "sorts": ("return torch.sort(x, dim=-1).values", "sort"),
    "two GEMMs": ("return (x @ x) @ x", "second GEMM"),
    "half precision": ("return torch.relu(x.half())", "dtype"),
    "reduces the first dim": ("return torch.softmax(x, dim=0)", "dimension 0"),
    "returns its input": ("return x", "computes nothing"),
}


@pytest.mark.parametrize("case", sorted(UNSUPPORTED))
def test_it_names_what_it_cannot_do(evaluator, case):
    body, expect = UNSUPPORTED[case]
    source = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
              f"        {body}\n\ndef get_inputs():\n    return [torch.randn(64, 64)]\n\ndef get_init_inputs():\n    return []\n")
    with pytest.raises(Unsupported, match=expect):
        plan_of(evaluator, source)


def test_integer_inputs_are_only_taken_as_class_indices(evaluator):
    source = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x, t):\n"
              "        return x + t\n\ndef get_inputs():\n    return [torch.randn(8, 8), torch.randint(0, 4, (8, 8))]\n\n"
              "def get_init_inputs():\n    return []\n")
    with pytest.raises(Unsupported, match="integer tensors in arithmetic"):
        plan_of(evaluator, source)
