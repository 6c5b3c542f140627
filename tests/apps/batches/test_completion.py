"""A batch is marked finished where its last run ends (apps/batches/completion.py), never when it is read."""
import pytest

from apps.batches import services
from apps.batches.models import Batch, BatchItem
from apps.problems.models import Problem
from apps.runs.models import Run
from apps.runs.services import cancel_run

pytestmark = pytest.mark.django_db


def _batch(owner, endpoint, runs=2):
    batch = Batch.objects.create(owner=owner, endpoint=endpoint, device="cpu")
    for position in range(runs):
        problem = Problem.objects.create(owner=owner, name=f"p{position}", source="x", source_hash=f"h{position}")
        run = Run.objects.create(problem=problem, owner=owner, kind=Run.Kind.AGENT)
        BatchItem.objects.create(batch=batch, problem=problem, run=run, position=position)
    return batch


def test_the_run_that_ends_a_batch_marks_it_finished_and_reading_it_writes_nothing(owner, builtin_endpoint):
    batch = _batch(owner, builtin_endpoint)
    first, last = [item.run for item in batch.items.order_by("position")]
    cancel_run(first)
    assert services.progress(batch)["done"] == 1
    batch.refresh_from_db()
    assert batch.status == Batch.Status.RUNNING
    Run.objects.filter(pk=last.pk).update(status=Run.Status.FINISHED)  # ended behind the studio's back
    assert services.progress(batch)["status"] == Batch.Status.RUNNING  # a read does not finish it
    batch.refresh_from_db()
    assert batch.status == Batch.Status.RUNNING and batch.finished_at is None
    Run.objects.filter(pk=last.pk).update(status=Run.Status.RUNNING)
    cancel_run(last)
    batch.refresh_from_db()
    assert batch.status == Batch.Status.FINISHED and batch.finished_at is not None


def test_a_cancelled_batch_stays_cancelled_when_its_last_run_ends(owner, builtin_endpoint):
    batch = _batch(owner, builtin_endpoint)
    assert services.cancel_batch(batch) == 2
    assert batch.status == Batch.Status.CANCELLED
