"""What the library keeps and how it ranks it (apps/kernels/services.py)."""
from __future__ import annotations

import pytest

from apps.kernels.models import Kernel
from apps.kernels.services import keep_accepted, leaderboard, offer
from apps.problems.services import sha256
from apps.runs import verdicts
from apps.runs.models import Candidate, Run
from tests.apps.cast import GOOD_CANDIDATE
from tests.apps.runs.pages import VERDICT

pytestmark = pytest.mark.django_db


def verdict(eager: float, compiled: float | None = None, *, noisy: bool = False) -> dict:
    timing = {**VERDICT["timing"], "speedup_vs_eager": eager, "speedup_vs_compile": compiled,
              "candidate_ms": 1.0 / eager}
    return {**VERDICT, "timing": timing, "flags": VERDICT["flags"] if noisy else []}


def candidate(owner, problem, v: dict, source: str | None = None) -> Candidate:
    source = source or GOOD_CANDIDATE.read_text()
    run = Run.objects.create(problem=problem, owner=owner, kind=Run.Kind.AGENT, status=Run.Status.RUNNING)
    return Candidate.objects.create(run=run, turn=1, source=source, source_hash=sha256(source), backend="cpp", verdict=v)


def test_a_correct_kernel_slower_than_the_best_baseline_is_not_kept(owner, problem):
    offered = offer(candidate(owner, problem, verdict(2.0, 0.5)))
    assert offered.kernel is None and "0.50x the faster PyTorch baseline (torch.compile)" in offered.reason
    assert not Kernel.objects.exists()


def test_a_noisy_timing_is_not_kept_however_fast(owner, problem):
    offered = offer(candidate(owner, problem, verdict(30.0, noisy=True)))
    assert offered.kernel is None and "noisy" in offered.reason


def test_the_margin_comes_from_the_setting(owner, problem, settings):
    settings.KSTUDIO_LIBRARY_MIN_SPEEDUP = 1.5
    assert offer(candidate(owner, problem, verdict(1.4))).kernel is None
    kept = offer(candidate(owner, problem, verdict(1.6))).kernel
    assert kept is not None and kept.speedup_best_of == 1.6


def test_the_same_source_is_stored_once_with_each_measurement_beside_it(owner, problem):
    first = offer(candidate(owner, problem, verdict(2.0)))
    second = offer(candidate(owner, problem, verdict(2.5)))
    assert first.kernel == second.kernel and second.duplicate and Kernel.objects.count() == 1
    assert [m["timing"]["speedup_vs_eager"] for m in second.kernel.measurements] == [2.0, 2.5]
    keep_accepted(second.kernel.candidate)  # a repeated step adds nothing
    assert len(Kernel.objects.get().measurements) == 2


def test_the_leaderboard_ranks_by_best_of_speedup_numerically_and_never_heads_with_a_noisy_one(owner, problem):
    figures = [(17.10, None, False), (29.25, None, False), (3.0, 2.0, False), (90.0, None, True)]
    kernels = [keep_accepted(candidate(owner, problem, verdict(e, c, noisy=n), source=f"# {e}\n" + GOOD_CANDIDATE.read_text()))
               for e, c, n in figures]
    [(_, ranked)] = leaderboard(Kernel.objects.filter(pk__in=[k.pk for k in kernels]))
    assert [k.speedup_vs_eager for k in ranked] == [29.25, 17.10, 3.0, 90.0]


def test_the_leaderboard_page_shows_the_best_of_figure_and_marks_noise(client, owner, problem):
    keep_accepted(candidate(owner, problem, verdict(3.0, 2.0)))
    client.force_login(owner)
    page = client.get(f"/kernels/problem/{problem.pk}/").content.decode()
    assert '<td class="best-of">2.00x</td>' in page


def test_saving_a_slow_best_says_why_it_was_not_kept(owner, problem):
    slow = candidate(owner, problem, verdict(0.5))
    assert verdicts.save_kernel(slow.run, slow) is False
    event = slow.run.events.get(kind="kernel_not_kept")
    assert event.payload["turn"] == 1 and "0.50x" in event.payload["reason"] and not Kernel.objects.exists()
