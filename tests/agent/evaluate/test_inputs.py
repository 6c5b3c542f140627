import types

import torch

from agent.evaluate import inputs


def _problem():
    module = types.ModuleType("p")
    module.get_inputs = lambda: [torch.randn(8, 16), torch.randint(0, 10, (8,))]
    return module


def test_it_draws_the_same_inputs_for_the_same_seed_and_others_for_another():
    p = _problem()
    a, b, c = inputs.problem_inputs(p, 1), inputs.problem_inputs(p, 1), inputs.problem_inputs(p, 2)
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])


def test_it_changes_floating_values_but_keeps_integer_inputs_and_shapes():
    base = inputs.problem_inputs(_problem(), 3)
    for dist, low, high in [("mixed_sign", 0.1, 10), ("scaled_large", 10, 1000), ("scaled_small", 1e-5, 1e-2)]:
        new = inputs.redistribute(base, dist, 7)
        assert new[0].shape == base[0].shape and new[0].dtype == base[0].dtype
        assert low < new[0].abs().mean() < high
        assert (new[0] < 0).any() and (new[0] > 0).any()
        assert torch.equal(new[1], base[1])


def test_it_samples_the_same_digest_positions_in_every_process():
    out = torch.randn(1000, 1000)
    first, second = inputs.digest([out], 11), inputs.digest([out.clone()], 11)
    assert torch.equal(first[0], second[0]) and first[0].numel() == 65_536
