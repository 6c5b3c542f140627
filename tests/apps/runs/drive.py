"""Running a run's steps in the test's own process, as a worker would."""
from __future__ import annotations

from apps.runs import steps
from apps.runs.models import Run


def drive(run: Run, limit: int = 40) -> Run:
    """Execute each step until the run is over (on_commit, which queues steps, does not fire inside a
    test transaction)."""
    for _ in range(limit):
        run.refresh_from_db()
        if run.is_terminal:
            return run
        assert steps.execute(run.pk, run.stage).retry_in is None
    raise AssertionError(f"run {run.pk} did not finish in {limit} steps: {run.status} at {run.stage}")
