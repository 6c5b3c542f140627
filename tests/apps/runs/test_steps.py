"""The run state machine, step by step in this process, with the real evaluation engine (cpp on the CPU)."""
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.kernels.models import Kernel
from apps.problems.services import create_problem
from apps.runs import evaluate_steps, steps
from apps.runs.models import Run
from apps.runs.services import start_evaluation
from tests.apps.cast import BAD_BUILD_CANDIDATE, GOOD_CANDIDATE
from tests.apps.runs.drive import drive

pytestmark = pytest.mark.django_db


def _seqs(run: Run) -> list[int]:
    return list(run.events.order_by("seq").values_list("seq", flat=True))


def test_it_builds_verifies_and_keeps_an_accepted_kernel(owner, problem, fast_eval):
    run = drive(start_evaluation(owner, problem, GOOD_CANDIDATE.read_text()))
    assert run.status == Run.Status.FINISHED, run.message
    kinds = [e.kind for e in run.events.order_by("seq")]
    assert kinds[:2] == ["run_created", "step_started"] and "build" in kinds and "verification" in kinds
    assert "timing" in kinds and "kernel_saved" in kinds and kinds[-1] == "run_finished"
    assert _seqs(run) == list(range(1, len(kinds) + 1))
    kernel = Kernel.objects.get()
    assert kernel.owner == owner and kernel.problem_hash == problem.source_hash and kernel.policy == "user"
    assert kernel.backend == "cpp" and kernel.device == "cpu" and kernel.speedup_vs_eager > 0
    assert kernel.verification["correct"] and kernel.toolchain and kernel.trajectory
    assert run.best_candidate_id == kernel.candidate_id and run.best_speedup == kernel.speedup_vs_eager


def test_it_reports_a_build_error_and_keeps_no_kernel(owner, problem, fast_eval):
    run = drive(start_evaluation(owner, problem, BAD_BUILD_CANDIDATE.read_text()))
    assert run.status == Run.Status.FINISHED and "build_error" in run.message
    build = run.events.get(kind="build")
    assert build.payload["ok"] is False and (build.payload["error"] or build.payload["log"])
    assert not Kernel.objects.exists()


# The upload's sandbox check refuses such a module (tests/apps/problems/test_check.py); a problem can still
# crash later (a flaky import, a stored problem from before the check), so the run must fail cleanly too.
@pytest.mark.parametrize("body, expect", [("raise RuntimeError('boom at import')", "boom at import")])
def test_it_fails_the_run_cleanly_when_the_problem_crashes_on_import(owner, fast_eval, body, expect, monkeypatch):
    monkeypatch.setattr("apps.problems.services.check_in_sandbox", lambda source, names, **options: {})
    source = f"{body}\n" + (GOOD_CANDIDATE.parent.parent / "problems" / "elementwise_silu_bias.py").read_text()
    problem = create_problem(owner, "broken.py", source)  # passed its upload check; only the run finds out
    run = drive(start_evaluation(owner, problem, GOOD_CANDIDATE.read_text()))
    assert run.status == Run.Status.FAILED
    assert "problem module failed in the sandbox" in run.message and expect.lower() in run.message.lower()
    problem.refresh_from_db()
    assert problem.runtime_error
    assert not Kernel.objects.exists()


def test_it_waits_for_a_fresh_claim_and_takes_over_a_stale_one(owner, problem, settings, monkeypatch):
    settings.KSTUDIO_STEP_LEASE_SECONDS = 60
    run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    Run.objects.filter(pk=run.pk).update(step_token="someone", step_claimed_at=timezone.now())
    assert steps.execute(run.pk, "build").retry_in > 30

    monkeypatch.setattr(evaluate_steps, "work_build", lambda r, c: {"ok": False, "error": "stub", "import_error": None,
                                                                    "build": {"backend": "cpp", "seconds": 0.0, "cache_hits": 0,
                                                                              "cache_misses": 0, "fast_path": "", "log": ""}})
    Run.objects.filter(pk=run.pk).update(step_claimed_at=timezone.now() - timedelta(seconds=61))
    assert steps.execute(run.pk, "build").retry_in is None
    started = run.events.filter(kind="step_started").last()
    assert started.payload["resumed"] is True and started.payload["attempt"] == 1
    run.refresh_from_db()
    assert run.is_terminal and _seqs(run) == list(range(1, run.last_seq + 1))


def test_it_discards_a_step_result_when_the_run_was_cancelled_meanwhile(owner, problem, monkeypatch):
    from apps.runs.services import cancel_run

    run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())

    def build_then_cancel(r, c):
        cancel_run(r)
        return {"ok": True, "error": "", "import_error": None, "build": {"backend": "cpp", "seconds": 0.0, "cache_hits": 0,
                                                                         "cache_misses": 0, "fast_path": "", "log": ""}}

    monkeypatch.setattr(evaluate_steps, "work_build", build_then_cancel)
    steps.execute(run.pk, "build")
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and not run.events.filter(kind="build").exists()


def test_it_skips_a_step_the_run_has_moved_past(owner, problem):
    run = start_evaluation(owner, problem, GOOD_CANDIDATE.read_text())
    Run.objects.filter(pk=run.pk).update(stage=Run.Stage.EVALUATE)
    before = run.events.count()
    assert steps.execute(run.pk, "build").retry_in is None
    assert run.events.count() == before


def test_a_kernel_that_forgot_its_bias_is_reported_incorrect_first(owner, problem, fast_eval):
    """Issue 24: a wrong kernel's verdict leads with the decisive finding (wrong output), not with a flag or a
    caching suspicion its wrong values set off."""
    forgot = GOOD_CANDIDATE.read_text().replace("yr[c] = v * sig + bp[c];", "yr[c] = v * sig;")
    assert forgot != GOOD_CANDIDATE.read_text()
    run = drive(start_evaluation(owner, problem, forgot))
    verdict = run.candidates.get().stored_verdict
    assert verdict.status == "incorrect" and verdict.message.startswith("incorrect"), verdict.message
    assert run.message.startswith("Not accepted (incorrect"), run.message
    assert not Kernel.objects.exists()
