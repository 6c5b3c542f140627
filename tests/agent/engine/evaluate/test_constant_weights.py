"""Parameters and buffers that a constructor fills with one value (a norm's weight of ones, its bias and running mean
of zeros, its running variance of ones) are judged at seeded values near it, never at the default alone: a kernel that
ignores them is wrong for every trained model. Through the real engine on the CPU."""

import pytest
import torch

from agent.engine.evaluate.inputs import seed_everything
from agent.engine.evaluate.plan import VARY, build_model
from agent.engine.verdict import Status

PROBLEM = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm((8, 16))
        self.bn = nn.BatchNorm1d(8)
        self.scale = nn.Parameter(torch.ones(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.ln(x)) * self.scale


def get_inputs():
    return [torch.randn(32, 8, 16)]


def get_init_inputs():
    return []
'''
HONEST = PROBLEM.replace("class Model(", "class ModelNew(")
# Right at the constructors' defaults only: no affine, running statistics taken as 0 and 1, the scale as 1.
DEFAULTS_ONLY = HONEST.replace("return self.bn(self.ln(x)) * self.scale",
                               "return F.layer_norm(x, (8, 16)) / (1.0 + self.bn.eps) ** 0.5")
# The same module with its parameters named otherwise (no state to copy over): built under the same seed, it draws the
# same values.
RENAMED = HONEST.replace("self.ln = nn.LayerNorm((8, 16))", "self.norm = nn.LayerNorm((8, 16))").replace(
    "self.ln(x)", "self.norm(x)")


def test_a_kernel_right_only_at_the_default_weights_is_incorrect(quick_cpu_evaluator):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, DEFAULTS_ONLY)
    assert verdict.status == Status.INCORRECT, (verdict.status, verdict.message)


@pytest.mark.parametrize("candidate", [HONEST, RENAMED], ids=["same names", "other names"])
def test_a_kernel_that_reads_the_weights_is_accepted(quick_cpu_evaluator, candidate):
    verdict = quick_cpu_evaluator.evaluate(PROBLEM, candidate)
    assert verdict.status == Status.ACCEPTED, (verdict.status, verdict.message)


def test_constant_tensors_move_near_their_value_seeded_and_random_ones_stay():
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.bn = torch.nn.BatchNorm1d(4)

    def weights(seed: int) -> dict[str, torch.Tensor]:
        seed_everything(seed)
        plain = {k: v.clone() for k, v in Net().state_dict().items()}
        built = build_model(Net, [], seed, "cpu").state_dict()
        assert torch.equal(built["lin.weight"], plain["lin.weight"])  # drawn under the seed; not a constant
        return built

    a, b, again = weights(1), weights(2), weights(1)
    assert all(torch.equal(a[k], again[k]) for k in a)
    assert not torch.equal(a["bn.weight"], b["bn.weight"])
    for key, default in (("bn.weight", 1.0), ("bn.running_var", 1.0)):
        assert ((a[key] - default).abs() <= VARY * default).all() and len(set(a[key].tolist())) == 4, a[key]
    for key in ("bn.bias", "bn.running_mean"):
        assert (a[key].abs() <= 0.1).all() and (a[key] != 0).all(), a[key]
    assert a["bn.num_batches_tracked"].item() == 0  # an integer counter, left alone
