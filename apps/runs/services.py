"""Runs: starting one, recording its events, cancelling it, resuming the unfinished ones."""
from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agent import validation
from apps.problems.models import Problem
from apps.problems.services import UploadRejected, names_of, sha256
from apps.runs import live
from apps.runs.models import Candidate, Event, Run


def append_event(run_id: int, kind: str, payload: dict[str, Any] | None = None) -> Event:
    """Store the run's next event and push it to watchers once committed.

    The run's row lock serialises writers, so seq is exactly last_seq + 1 whatever the number of
    workers; pushing only after commit means a browser never sees an event the database lacks."""
    with transaction.atomic():
        run = Run.objects.select_for_update().only("id", "last_seq").get(pk=run_id)
        seq = run.last_seq + 1
        Run.objects.filter(pk=run_id).update(last_seq=seq)
        event = Event.objects.create(run_id=run_id, seq=seq, kind=kind, payload=payload or {})
        message = event.to_message()
        transaction.on_commit(lambda: live.publish(run_id, message))
    return event


def events_after(run_id: int, after: int) -> list[dict[str, Any]]:
    return [e.to_message() for e in Event.objects.filter(run_id=run_id, seq__gt=after).order_by("seq")]


def default_config() -> dict[str, Any]:
    return {"device": settings.KSTUDIO_DEVICE, "backend": None, "compile_baseline": settings.KSTUDIO_COMPILE_BASELINE,
            "iterations": settings.KSTUDIO_EVAL_ITERATIONS}


def start_evaluation(user: AbstractBaseUser, problem: Problem, candidate_source: str, backend: str | None = None,
                     shared: bool = False) -> Run:
    """"Evaluate my kernel": check the candidate's shape (AST only), then queue its build."""
    report = validation.validate_candidate(candidate_source, problem_source=problem.source,
                                           problem_names=names_of(problem))
    if not report.ok:
        raise UploadRejected("The candidate cannot be evaluated; fix the errors marked in the code and submit again.",
                             report.errors(), candidate_source)
    backend = backend or None
    if backend not in (None, "cuda", "nvrtc", "triton", "cpp"):
        raise UploadRejected(f"Unknown backend {backend!r}; choose cuda, nvrtc, triton or cpp, or leave it to be guessed.")
    from apps.runs import steps  # steps imports tasks, which import services: keep the cycle lazy

    with transaction.atomic():
        run = Run.objects.create(
            problem=problem, owner=user, kind=Run.Kind.EVALUATE, shared=shared,
            config={**default_config(), "backend": backend},
            budgets={"wall_seconds": settings.KSTUDIO_CANDIDATE_WALL_SECONDS, "turns": 1})
        Candidate.objects.create(run=run, turn=1, source=candidate_source, source_hash=sha256(candidate_source),
                                 backend=backend or report.backend_hint or "")
        append_event(run.pk, "run_created", {
            "kind": run.kind, "problem": problem.name, "config": run.config, "budgets": run.budgets,
            "warnings": [w.message for w in report.warnings()]})
        steps.schedule(run.pk, run.stage)
    return run


# Budgets a user may set on an agent run: name -> (type, the settings maximum it may not exceed).
AGENT_BUDGETS = {"turns": "KSTUDIO_AGENT_MAX_TURNS", "tokens": "KSTUDIO_AGENT_MAX_TOKENS",
                 "agent_wall_seconds": "KSTUDIO_AGENT_WALL_SECONDS"}


def agent_budgets(requested: dict[str, Any]) -> dict[str, Any]:
    """The run's budgets: the studio's defaults, lowered where the user asked for less. Raises
    UploadRejected naming the budget that is not a positive number."""
    budgets: dict[str, Any] = {"wall_seconds": settings.KSTUDIO_CANDIDATE_WALL_SECONDS, "gpu_seconds": None}
    for name, setting in AGENT_BUDGETS.items():
        limit = getattr(settings, setting)
        value = requested.get(name)
        if value in (None, ""):
            budgets[name] = limit
            continue
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise UploadRejected(f"The budget {name!r} must be a whole number, not {value!r}.") from None
        if number < 1:
            raise UploadRejected(f"The budget {name!r} must be at least 1.")
        budgets[name] = min(number, limit)
    gpu = requested.get("gpu_seconds")
    if gpu not in (None, ""):
        try:
            budgets["gpu_seconds"] = float(gpu)
        except (TypeError, ValueError):
            raise UploadRejected(f"The budget 'gpu_seconds' must be a number, not {gpu!r}.") from None
        if budgets["gpu_seconds"] <= 0:
            raise UploadRejected("The budget 'gpu_seconds' must be positive.")
    return budgets


def start_agent_run(user: AbstractBaseUser, problem: Problem, endpoint: Any, budgets: dict[str, Any] | None = None,
                    instructions: str = "", shared: bool = False) -> Run:
    """"Optimize with the agent": queue the first model turn. The problem must have passed its checks."""
    from apps.runs import steps

    if not validation.validate_problem(problem.source).ok:
        raise UploadRejected("This problem has validation errors; fix and upload it again before optimizing it.")
    if names_of(problem) != validation.ProblemNames():
        # The agent's prompt and tools speak KernelBench's names (Model, get_inputs, get_init_inputs).
        raise UploadRejected("The agent works on problems that use KernelBench's names (Model, get_inputs, "
                             "get_init_inputs); rename them in the module, upload it again, then start the agent.")
    if problem.runtime_error:
        raise UploadRejected(f"This problem failed when it was run: {problem.runtime_error[:500]}")
    if endpoint is None or not endpoint.enabled:
        raise UploadRejected("Choose an enabled model for the agent (admins configure them under Model endpoints).")
    if len(instructions) > 20_000:
        raise UploadRejected("The instructions are longer than 20,000 characters; shorten them.")
    with transaction.atomic():
        run = Run.objects.create(
            problem=problem, owner=user, kind=Run.Kind.AGENT, shared=shared, endpoint=endpoint, stage=Run.Stage.THINK,
            config={**default_config(), "policy": f"{endpoint.kind}:{endpoint.name}", "model": endpoint.model,
                    "endpoint": endpoint.name, "instructions": instructions},
            budgets=agent_budgets(budgets or {}))
        append_event(run.pk, "run_created", {"kind": run.kind, "problem": problem.name, "config": run.config,
                                             "budgets": run.budgets})
        steps.schedule(run.pk, run.stage)
    return run


def cancel_run(run: Run) -> bool:
    """Stop a run: a step still working finds the run terminal when it commits and discards its result.
    An agent run keeps what it had: its best kernel, its trajectory, its knowledge-base entries."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.is_terminal:
            return False
        if locked.kind == Run.Kind.AGENT and locked.agent_state is not None:
            from agent import loop
            from apps.runs.agent_steps import finish
            from apps.runs.steps import RUN_STATE_FIELDS

            locked.step_token, locked.step_claimed_at = "", None
            finish(locked, loop.cancel(loop.AgentState.from_dict(locked.agent_state)))
            locked.save(update_fields=RUN_STATE_FIELDS)  # last_seq is append_event's
            return True
        Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, finished_at=timezone.now(),
                                             message="Cancelled by the user.", step_token="")
        append_event(run.pk, "run_finished", {"status": Run.Status.CANCELLED, "message": "Cancelled by the user."})
    return True


def resume_unfinished_runs() -> int:
    """Re-queue the current step of every unfinished run. Called when a worker starts: with the embedded
    in-memory broker a restart loses queued messages; with Redis it shortens the wait for a dead worker's
    unacked message. Steps are idempotent (keyed on the run's stage and claim), so duplicates are harmless."""
    from apps.runs import steps

    count = 0
    for run_id, stage in Run.objects.exclude(status__in=Run.TERMINAL).values_list("id", "stage"):
        steps.enqueue(run_id, stage)
        count += 1
    return count
