"""Storing synthesized problems: tagged synthetic, with what the pipeline measured, once per source."""
import pytest

from apps.problems.models import Origin, Problem
from apps.problems.synthetic import store_synthesized
from tests.apps.cast import PROBLEM
from trainer.synthesis.pipeline import SynthesizedProblem

pytestmark = pytest.mark.django_db

SOURCE = PROBLEM.read_text()


def _synth(name="synth_silu_bias_0001", source=SOURCE):
    return SynthesizedProblem(name=name, source=source, device="cpu", ops=["silu", "bias_add"],
                              checks={"eager_ms": 0.2, "compile_ms": 900.0, "output_shape": [16, 64]})


def test_it_stores_problems_tagged_synthetic_with_the_pipelines_measurements(owner):
    done = store_synthesized(owner, [_synth()])
    problem = Problem.objects.get()
    assert done.created == [problem] and problem.origin == Origin.SYNTHETIC and problem.owner == owner
    assert problem.validation["ok"] is True and not problem.shared
    assert problem.validation["synthesis"] == {"ops": ["silu", "bias_add"], "device": "cpu", "eager_ms": 0.2,
                                               "compile_ms": 900.0, "output_shape": [16, 64]}


def test_it_leaves_a_source_the_owner_already_has_but_stores_it_for_another_user(owner, member):
    store_synthesized(owner, [_synth()])
    again = store_synthesized(owner, [_synth(name="another_name")])
    assert again.existing == ["another_name"] and not again.created
    assert store_synthesized(member, [_synth()]).created
    assert Problem.objects.filter(origin=Origin.SYNTHETIC).count() == 2


def test_it_refuses_a_source_that_is_not_a_problem_and_keeps_the_others(owner):
    done = store_synthesized(owner, [_synth(name="broken", source="import torch\nx = 1\n"), _synth()], shared=True)
    assert [name for name, _ in done.invalid] == ["broken"] and "Model" in done.invalid[0][1]
    assert [p.name for p in done.created] == ["synth_silu_bias_0001"] and done.created[0].shared
