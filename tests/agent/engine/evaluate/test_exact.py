"""The reference in float64 (agent/engine/evaluate/exact.py): run only within its share of the reference job's time
and the memory it has left, and never an error of its own: a problem that does not run in float64 keeps its strict
comparison, with the reason."""
import torch

from agent.engine.evaluate.exact import SHARE, SLOWER, Float64Reference
from agent.engine.sandbox import Limits


class _Centred(torch.nn.Module):
    def forward(self, x):
        return (x - x.mean(dim=1, keepdim=True)).mean(dim=1)


class _MakesFloat32(torch.nn.Module):
    def forward(self, x):
        return x @ torch.ones(x.shape[1], 3)  # a float32 tensor of its own: float64 inputs do not multiply with it


def _x():
    return torch.randn(8, 256, generator=torch.Generator().manual_seed(0)) * 10 + 3


def test_it_returns_the_models_outputs_in_float64_on_widened_inputs_and_leaves_the_model_as_it_was():
    model = torch.nn.Linear(256, 4)
    ref = Float64Reference(model, "cpu", Limits())
    x = _x()
    exacts, why = ref.outputs([x], [model(x)], 0.01)
    assert why == "" and exacts[0].dtype == torch.float64
    assert model.weight.dtype == torch.float32  # a copy was widened, not the reference's own model
    expected = torch.nn.functional.linear(x.double(), model.weight.double(), model.bias.double())
    assert torch.equal(exacts[0], expected)


def test_it_refuses_a_run_that_could_take_more_than_its_share_of_the_jobs_time():
    ref = Float64Reference(_Centred(), "cpu", Limits(wall_seconds=100))
    x = _x()
    slow = SHARE * 100 / SLOWER * 1.01  # a float32 call this slow could take past the share in float64
    exacts, why = ref.outputs([x], [_Centred()(x)], slow)
    assert exacts is None and "of the reference job's time are left" in why
    exacts, _ = ref.outputs([x], [_Centred()(x)], 0.001)
    assert exacts is not None and ref.seconds_left < SHARE * 100  # what it took is spent


def test_it_refuses_a_run_the_jobs_memory_cannot_hold():
    ref = Float64Reference(_Centred(), "cpu", Limits(memory_bytes=64 << 20))  # far less than torch itself maps
    exacts, why = ref.outputs([_x()], [_Centred()(_x())], 0.001)
    assert exacts is None and "MiB and its job has" in why


def test_a_problem_that_does_not_run_in_float64_says_why_and_raises_nothing():
    ref = Float64Reference(_MakesFloat32(), "cpu", Limits())
    exacts, why = ref.outputs([_x()], [_MakesFloat32()(_x())], 0.001)
    assert exacts is None and why.startswith("the reference does not run in float64 (RuntimeError")


def test_the_noise_is_the_references_own_rms_error_on_the_worse_base():
    ref = Float64Reference(_Centred(), "cpu", Limits())
    small, large = _x(), _x() * 100  # the rounding noise grows with the inputs' magnitude
    noise = ref.noise([[small], [large]])
    exact = (large.double() - large.double().mean(dim=1, keepdim=True)).mean(dim=1)
    own = float((_Centred()(large).double() - exact).square().mean().sqrt())
    assert noise is not None and abs(noise[0] - own) <= 1e-3 * own
    assert Float64Reference(_MakesFloat32(), "cpu", Limits()).noise([[small], [large]]) is None
