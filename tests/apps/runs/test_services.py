import threading

import pytest
from django.db import connection

from apps.core.errors import Refused
from apps.runs import queues
from apps.runs.models import Event, Run
from apps.runs.events import append_event
from apps.runs.services import cancel_run, resume_unfinished_runs, start_evaluation
from tests.apps.cast import GOOD_CANDIDATE


@pytest.mark.django_db
def test_it_starts_an_evaluation_and_enqueues_the_build_on_commit(owner, problem, monkeypatch,
                                                                  django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(queues, "enqueue", lambda run_id, stage: sent.append((run_id, stage)))
    with django_capture_on_commit_callbacks(execute=True):
        run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    assert run.status == Run.Status.QUEUED and run.stage == Run.Stage.BUILD
    assert run.candidates.get().backend == "cpp"
    assert [e.kind for e in run.events.all()] == ["run_created"]
    assert sent == [(run.pk, "build")]


@pytest.mark.django_db
def test_it_rejects_a_candidate_without_modelnew_and_creates_no_run(owner, problem):
    with pytest.raises(Refused) as info:
        start_evaluation(owner, problem, "import torch\nclass Model(torch.nn.Module):\n    pass\n")
    assert "ModelNew" in " ".join(i.message for i in info.value.issues)
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_it_numbers_events_one_by_one(owner, problem):
    run = Run.objects.create(problem=problem, owner=owner)
    seqs = [append_event(run.pk, "x", {"i": i}).seq for i in range(5)]
    assert seqs == [1, 2, 3, 4, 5]
    run.refresh_from_db()
    assert run.last_seq == 5


@pytest.mark.django_db(transaction=True)
def test_it_numbers_concurrent_events_without_gap_or_duplicate(owner, problem):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need Postgres (make test sets DATABASE_URL)")
    run = Run.objects.create(problem=problem, owner=owner)

    def writer() -> None:
        for _ in range(15):
            append_event(run.pk, "x")
        connection.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(Event.objects.filter(run=run).values_list("seq", flat=True).order_by("seq")) == list(range(1, 61))


@pytest.mark.django_db
def test_it_cancels_a_run_once(owner, problem):
    run = Run.objects.create(problem=problem, owner=owner)
    assert cancel_run(run) is True
    assert cancel_run(run) is False
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.events.get().kind == "run_finished"


@pytest.mark.django_db
def test_it_requeues_every_unfinished_run(owner, problem, monkeypatch):
    sent = []
    monkeypatch.setattr(queues, "enqueue", lambda run_id, stage: sent.append((run_id, stage)))
    a = Run.objects.create(problem=problem, owner=owner, status=Run.Status.RUNNING, stage=Run.Stage.EVALUATE)
    Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED, stage=Run.Stage.DONE)
    assert resume_unfinished_runs() == 1 and sent == [(a.pk, "evaluate")]
