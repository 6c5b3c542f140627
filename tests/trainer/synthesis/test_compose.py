"""Random chains render into valid problem modules whose output has the tracked shape."""
import random

import torch

from agent.engine.validation import validate_problem
from trainer.synthesis.catalogue import CPU_SIZES
from trainer.synthesis.compose import random_chain, render


def _run(source):
    scope = {}
    exec(compile(source, "synthesized.py", "exec"), scope)
    torch.manual_seed(0)
    model = scope["Model"](*scope["get_init_inputs"]())
    with torch.no_grad():
        return model(*scope["get_inputs"]())


def test_it_renders_chains_that_validate_and_run_with_the_tracked_shape():
    rng = random.Random(11)
    for _ in range(40):
        chain = random_chain(rng, CPU_SIZES, 1, 5)
        assert chain is not None and 1 <= len(chain.steps) <= 5
        source = render(chain)
        report = validate_problem(source)
        assert report.ok, (source, report.errors())
        out = _run(source)
        assert tuple(out.shape) == chain.out_shape, source
        assert not chain.steps[-1].op.view  # the output is computed, never a view of the input


def test_it_composes_the_same_chains_from_the_same_seed_and_others_from_another():
    def sources(seed):
        rng = random.Random(seed)
        return [render(random_chain(rng, CPU_SIZES, 2, 4)) for _ in range(5)]

    assert sources(3) == sources(3)
    assert sources(3) != sources(4)


def test_it_respects_the_chain_length_bounds():
    rng = random.Random(5)
    lengths = {len(random_chain(rng, CPU_SIZES, 3, 3).steps) for _ in range(20)}
    assert lengths == {3}


def test_it_adds_an_input_for_each_binary_op():
    rng = random.Random(0)
    for _ in range(200):
        chain = random_chain(rng, CPU_SIZES, 1, 5)
        if any(step.op.extra_input for step in chain.steps):
            break
    source = render(chain)
    extra = sum(step.op.extra_input for step in chain.steps)
    scope = {}
    exec(source, scope)
    assert len(scope["get_inputs"]()) == 1 + extra
