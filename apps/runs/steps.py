"""The run state machine. Each step: claim the run's current stage (in a transaction), do the work
outside any transaction, then commit the result only if the claim still holds and the run is still
going. Everything a step needs is read from the database, so a redelivered task simply repeats or
skips its step; a claim whose worker vanished is taken over after KSTUDIO_STEP_LEASE_SECONDS.

The stages' work lives in evaluate_steps.py (build, evaluate) and agent_steps.py (think, act); this
module only claims, runs and commits them. Untrusted code is never imported here: the Evaluator
builds and runs it in its sandbox."""
from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from apps.batches.completion import finish_batch_if_done
from apps.runs import agent_steps, evaluate_steps, queues
from apps.runs.events import append_event
from apps.runs.models import RUN_STATE_FIELDS, Candidate, Run
from apps.runs.verdicts import fail
from studio.storable import storable_text

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What a step decided: run it later (another worker holds a fresh claim), or nothing more to do."""

    retry_in: float | None = None


def execute(run_id: int, stage: str) -> Outcome:
    token = uuid.uuid4().hex
    claimed = _claim(run_id, stage, token)
    if isinstance(claimed, Outcome):
        return claimed
    run, candidate = claimed
    try:
        result = _work(stage, run, candidate)
    except Exception as exc:  # our bug or a broken sandbox: fail the run visibly instead of leaving it claimed
        log.exception("step %s of run %s failed", stage, run_id)
        message = storable_text(f"The {stage} step failed inside the studio ({type(exc).__name__}: {exc}); try again, "
                                "and tell an admin if it keeps happening.")
        _commit(run_id, token, lambda r, c: fail(r, message))
        raise
    _commit(run_id, token, lambda r, c: _apply(stage, r, c, result))
    return Outcome()


def _work(stage: str, run: Run, candidate: Candidate | None) -> dict[str, Any]:
    """The stage's work, outside any transaction (it may take minutes)."""
    match stage:
        case Run.Stage.BUILD:
            return evaluate_steps.work_build(run, candidate)
        case Run.Stage.EVALUATE:
            return evaluate_steps.work_evaluate(run, candidate)
        case Run.Stage.THINK:
            return agent_steps.work_think(run, candidate)
        case Run.Stage.ACT:
            return agent_steps.work_act(run, candidate)
    raise ValueError(f"no work for the stage {stage!r}")


def _apply(stage: str, run: Run, candidate: Candidate | None, result: dict[str, Any]) -> None:
    """The stage's result committed to the run (under the step's claim)."""
    match stage:
        case Run.Stage.BUILD:
            evaluate_steps.apply_build(run, candidate, result)
        case Run.Stage.EVALUATE:
            evaluate_steps.apply_evaluate(run, candidate, result)
        case Run.Stage.THINK:
            agent_steps.apply_think(run, candidate, result)
        case Run.Stage.ACT:
            agent_steps.apply_act(run, candidate, result)
        case _:
            raise ValueError(f"no result to apply for the stage {stage!r}")


def _claim(run_id: int, stage: str, token: str) -> Outcome | tuple[Run, Candidate | None]:
    lease = timedelta(seconds=settings.KSTUDIO_STEP_LEASE_SECONDS)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal or run.stage != stage:
            return Outcome()  # done already (a duplicate or a redelivery of a finished step)
        now = timezone.now()
        if run.step_token and run.step_claimed_at and run.step_claimed_at + lease > now:
            return Outcome(retry_in=max(1.0, (run.step_claimed_at + lease - now).total_seconds()))
        taken_over = bool(run.step_token)
        run.step_token, run.step_claimed_at, run.step_attempts = token, now, run.step_attempts + 1
        if run.status == Run.Status.QUEUED:
            run.status, run.started_at = Run.Status.RUNNING, now
        run.save(update_fields=["step_token", "step_claimed_at", "step_attempts", "status", "started_at"])
        append_event(run_id, "step_started", {"stage": stage, "attempt": run.step_attempts, "resumed": taken_over})
        candidate = run.candidates.order_by("-turn").first()
    return run, candidate


# A database restart while a step works breaks this worker's connection: its result is committed again
# on a fresh one (about a minute of attempts) rather than lost.
_COMMIT_ATTEMPTS = 8


def _commit(run_id: int, token: str, apply: Callable[[Run, Candidate | None], None]) -> None:
    for attempt in range(_COMMIT_ATTEMPTS):
        try:
            return _commit_once(run_id, token, apply)
        except (OperationalError, InterfaceError) as exc:
            if attempt == _COMMIT_ATTEMPTS - 1:
                raise
            log.warning("run %s: committing the step failed (%s); retrying on a new connection", run_id, exc)
            connection.close()  # the pool drops the broken connection and checks the next one it lends
            time.sleep(min(2 ** attempt, 15))


def _commit_once(run_id: int, token: str, apply: Callable[[Run, Candidate | None], None]) -> None:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal or run.step_token != token:
            log.info("run %s: step result discarded (run %s, claim %s)", run_id, run.status,
                     "held" if run.step_token == token else "lost")
            return
        run.step_token, run.step_claimed_at = "", None
        candidate = run.candidates.order_by("-turn").first()
        apply(run, candidate)
        # last_seq is owned by append_event (updated in place); this copy of the row has a stale one.
        run.save(update_fields=RUN_STATE_FIELDS)
        if run.is_terminal:
            finish_batch_if_done(run_id)
        else:
            queues.schedule(run_id, run.stage)
