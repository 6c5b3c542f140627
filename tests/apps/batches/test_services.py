import math
from pathlib import Path

import pytest

from apps.batches import services
from apps.batches.models import Batch, BatchItem
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.core.errors import Refused
from apps.problems.services import create_problem
from apps.runs.models import Candidate, Run
from tests.apps.runs.drive import drive

pytestmark = pytest.mark.django_db

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _stored_batch(owner, outcomes, endpoint):
    """A batch whose runs already carry verdicts: each outcome is (verdict status, vs eager, vs compile) or None."""
    batch = Batch.objects.create(owner=owner, endpoint=endpoint, device="cpu")
    for i, outcome in enumerate(outcomes):
        problem = Problem.objects.create(owner=owner, name=f"p{i}.py", source="x", source_hash=str(i))
        run = Run.objects.create(problem=problem, owner=owner, kind="agent",
                                 status=Run.Status.RUNNING if outcome is None else Run.Status.FINISHED)
        if outcome is not None:
            status, eager, compiled = outcome
            verdict = {"status": status, "correct": status == "accepted",
                       "timing": {"speedup_vs_eager": eager, "speedup_vs_compile": compiled}}
            cand = Candidate.objects.create(run=run, turn=1, source="s", source_hash="h", verdict=verdict)
            if status == "accepted":
                Run.objects.filter(pk=run.pk).update(best_candidate=cand, best_speedup=eager)
        BatchItem.objects.create(batch=batch, problem=problem, run=run, position=i)
    return batch


def test_the_report_computes_kernelbench_figures_from_stored_verdicts(owner, builtin_endpoint):
    batch = _stored_batch(owner, [("accepted", 0.6, 0.5), ("accepted", 1.2, 1.0), ("accepted", 3.0, None),
                                  ("incorrect", 5.0, 5.0), None], builtin_endpoint)
    report = services.report(batch)
    summary = report["summary"]
    assert summary["problems"] == 5 and summary["finished"] == 4 and summary["correct"] == 3
    assert summary["correctness_rate"] == pytest.approx(0.6)
    assert summary["fast_p"] == pytest.approx({"0": 0.6, "0.5": 0.6, "0.8": 0.4, "1": 0.4, "1.5": 0.2, "2": 0.2})
    assert summary["geomean_speedup_vs_eager"] == pytest.approx((0.6 * 1.2 * 3.0) ** (1 / 3))
    assert summary["geomean_speedup_vs_compile"] == pytest.approx(math.sqrt(0.5 * 1.0))
    # Against the faster of the two: these verdicts predate speedup_vs_best, so it is the smaller speedup.
    assert summary["geomean_speedup_vs_best"] == pytest.approx((0.5 * 1.0 * 3.0) ** (1 / 3))
    assert summary["fast_p_vs_best"] == pytest.approx({"0": 0.6, "0.5": 0.4, "0.8": 0.4, "1": 0.2, "1.5": 0.2, "2": 0.2})
    assert summary["geomean_sol_fraction"] is None  # no verdict carried one
    verdicts = [(r["verdict"], r["correct"], r["speedup_vs_eager"]) for r in report["rows"]]
    # An incorrect kernel's speed does not count; the unfinished run is pending.
    assert verdicts == [("accepted", True, 0.6), ("accepted", True, 1.2), ("accepted", True, 3.0),
                        ("incorrect", False, None), ("pending", False, None)]
    assert report["status"] == "running"


def test_a_batch_with_no_correct_kernel_has_no_geomean(owner, builtin_endpoint):
    summary = services.report(_stored_batch(owner, [("incorrect", 2.0, 2.0)], builtin_endpoint))["summary"]
    assert summary["correctness_rate"] == 0 and summary["geomean_speedup_vs_eager"] is None
    assert set(summary["fast_p"].values()) == {0}


def test_it_refuses_an_empty_batch_and_a_problem_listed_twice(owner, problem, builtin_endpoint):
    config = services.RunConfig(endpoint=builtin_endpoint, budgets={})
    with pytest.raises(Refused, match="at least one"):
        services.start_batch(owner, [], config)
    with pytest.raises(Refused, match="twice"):
        services.start_batch(owner, [problem, problem], config)
    assert not Batch.objects.exists() and not Run.objects.exists()


def test_a_batch_of_two_examples_runs_to_completion_with_the_builtin_policy(owner, fast_eval, builtin_endpoint):
    problems = [create_problem(owner, name, (EXAMPLES / name).read_text()) for name in ("relu_scale_bias.py", "row_sum.py")]
    config = services.RunConfig(endpoint=builtin_endpoint, budgets={"turns": 3}, device="cpu")
    batch = services.start_batch(owner, problems, config, name="two examples")
    assert services.progress(batch) == {"total": 2, "done": 0, "counts": {**dict.fromkeys(Run.Status.values, 0), "queued": 2},
                                        "status": "running"}
    for item in batch.items.all():
        drive(item.run, limit=80)
    assert services.progress(batch)["done"] == 2
    batch.refresh_from_db()
    assert batch.status == Batch.Status.FINISHED
    report = services.report(batch)
    for row in report["rows"]:
        run = Run.objects.get(pk=row["run_id"])
        best = run.best_candidate
        assert row["correct"] == (best is not None and best.verdict["status"] == "accepted")
        if row["correct"]:
            assert row["speedup_vs_eager"] == best.verdict["timing"]["speedup_vs_eager"]
            assert Kernel.objects.get(pk=row["kernel_id"]).candidate_id == best.pk
    correct = [r for r in report["rows"] if r["correct"]]
    assert report["summary"]["correct"] == len(correct) >= 1, report
    assert report["summary"]["fast_p"]["0"] == pytest.approx(
        sum(1 for r in correct if r["speedup_vs_eager"] > 0) / 2)
