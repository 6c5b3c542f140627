"""Every seed op does to a real tensor what the catalogue says it does to the shape."""
import random

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from trainer.synthesis.catalogue import CATALOGUE, CATEGORIES, CPU_SIZES

SHAPES = {1: (64,), 2: (32, 48), 3: (4, 16, 24), 4: (2, 8, 12, 12)}


@pytest.mark.parametrize("op", CATALOGUE, ids=lambda op: op.name)
def test_it_gives_each_op_the_output_shape_it_really_has(op):
    rng = random.Random(0)
    ran = 0
    for rank in op.ranks:
        shape = SHAPES[rank]
        params = op.pick(shape, CPU_SIZES, rng)
        if params is None:
            continue
        fields = {k: v for k, v in params.items() if k != "out"} | {"m": "op", "y": "y"}
        module = nn.Module()
        if op.init:
            exec(op.init.format(**fields).replace("self.", "module."), {"nn": nn, "torch": torch, "module": module})
        scope = {"torch": torch, "F": F, "self": module, "x": torch.randn(shape), "y": torch.randn(shape),
                 "residual": torch.randn(shape)}
        exec(op.forward.format(**fields), scope)
        assert tuple(scope["x"].shape) == params["out"], op.forward
        ran += 1
    assert ran, f"{op.name} applies to none of its declared ranks {op.ranks}"


def test_it_covers_every_kind_of_work_the_issue_names():
    assert set(CATEGORIES) >= {"activation", "arithmetic", "binary", "reduction", "normalization", "matmul", "conv",
                               "pool", "layout", "residual"}
    names = {op.name for op in CATALOGUE}
    assert {"relu", "gelu", "softmax", "log_softmax", "layer_norm", "rms_norm", "linear", "conv3x3", "max_pool2",
            "transpose", "residual", "sum_last", "amax_last", "clamp"} <= names
    assert len(names) == len(CATALOGUE)  # names are unique


def test_it_refuses_shapes_an_op_cannot_take():
    ops = {op.name: op for op in CATALOGUE}
    rng = random.Random(0)
    assert ops["max_pool2"].pick((2, 4, 2, 2), CPU_SIZES, rng) is None  # too small to pool by 2
    assert ops["glu"].pick((8, 7), CPU_SIZES, rng) is None  # odd last dim
    assert ops["sum_last"].pick((64,), CPU_SIZES, rng) is None  # would leave a scalar
    assert ops["upsample2"].pick((4, 32, 512, 512), CPU_SIZES, rng) is None  # over max_elements
