import types

import torch

from agent.engine.evaluate import inputs
from agent.engine.evaluate.plan import generate


def _problem():
    module = types.ModuleType("p")
    module.get_inputs = lambda: [torch.randn(8, 16), torch.randint(0, 10, (8,))]
    return module


def test_it_draws_the_same_inputs_for_the_same_seed_and_others_for_another():
    p = _problem()
    a, b, c = generate(p, "get_inputs", 1, "cpu"), generate(p, "get_inputs", 1, "cpu"), generate(p, "get_inputs", 2, "cpu")
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])


def test_it_changes_floating_values_but_keeps_integer_inputs_and_shapes():
    base = generate(_problem(), "get_inputs", 3, "cpu")
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


def test_it_perturbs_the_same_positions_to_the_same_values_in_every_process():
    values = [torch.randn(512, 512), torch.arange(4)]
    first, second = inputs.perturb(values, 5), inputs.perturb([v.clone() for v in values], 5)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], values[1])
    changed = int((first[0] != values[0]).sum())
    assert 0 < changed <= values[0].numel() // 4096  # few enough that a sampled fingerprint misses them


def test_it_changes_at_least_sixteen_positions_of_a_small_tensor():
    small = torch.randn(100)
    changed = int((inputs.perturb([small], 3)[0] != small).sum())
    assert 8 <= changed <= 16  # 16 drawn; a repeated position counts once
