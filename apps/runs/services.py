"""Runs: starting one, cancelling it, resuming the unfinished ones (their events: events.py; their steps: steps.py)."""
from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agent.loop import state as agent_state
from agent.engine import validation
from agent.engine import BACKENDS
from agent.engine.backends import in_words as backends_in_words
from apps.batches.completion import finish_batch_if_done
from apps.core.errors import NotThere, Refused
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.problems.services import first_error, sha256
from apps.runs import queues, quotas
from apps.runs.events import append_event
from apps.runs.models import RUN_STATE_FIELDS, Candidate, Run
from apps.runs.selectors import unfinished_runs
from apps.runs.verdicts import finish_agent_run


def default_config() -> dict[str, Any]:
    return {"device": settings.KSTUDIO_DEVICE, "backend": None, "compile_baseline": settings.KSTUDIO_COMPILE_BASELINE,
            "min_rounds": settings.KSTUDIO_EVAL_MIN_ROUNDS, "max_rounds": settings.KSTUDIO_EVAL_MAX_ROUNDS}


def start_evaluation(user: AbstractBaseUser, problem: Problem, candidate_source: str, *, backend: str | None = None,
                     shared: bool = False, rebenchmark_of: int | None = None,
                     profile_of: dict[str, int] | None = None) -> Run:
    """"Evaluate my kernel": check the candidate's shape (AST only), then queue its build. A refusal carries the
    candidate's source, so a page can show it back. `rebenchmark_of`: the library kernel whose measurements the
    verdict's timing joins (apps/kernels/services.rebenchmark). `profile_of`: the candidate ({"run", "turn"}) this
    evaluation profiles (start_profile)."""
    extra = {**({"rebenchmark_of": rebenchmark_of} if rebenchmark_of is not None else {}),
             **({"profile": True, "profile_of": profile_of} if profile_of is not None else {})}
    try:
        return _start_evaluation(user, problem, candidate_source, backend, shared, extra)
    except Refused as refusal:
        refusal.source = refusal.source or candidate_source
        raise


def _start_evaluation(user: AbstractBaseUser, problem: Problem, candidate_source: str, backend: str | None,
                      shared: bool, extra: dict[str, Any]) -> Run:
    report = validation.validate_candidate(candidate_source, problem_source=problem.source,
                                           problem_names=problem.names)
    if not report.ok:
        raise Refused(f"The candidate cannot be evaluated: {first_error(report.errors())}", report.errors(),
                      candidate_source)
    backend = backend or None
    if backend is not None and backend not in BACKENDS:
        raise Refused(f"Unknown backend {backend!r}; choose {backends_in_words()}, or leave it to be guessed.")
    with transaction.atomic():
        quotas.check_can_start(user)
        run = Run.objects.create(
            problem=problem, owner=user, kind=Run.Kind.EVALUATE, shared=shared,
            config={**default_config(), "backend": backend, **extra},
            budgets={"wall_seconds": settings.KSTUDIO_CANDIDATE_WALL_SECONDS, "turns": 1})
        Candidate.objects.create(run=run, turn=1, source=candidate_source, source_hash=sha256(candidate_source),
                                 backend=backend or report.backend_hint or "")
        append_event(run.pk, "run_created", {
            "kind": run.kind, "problem": problem.name, "config": run.config, "budgets": run.budgets,
            "warnings": [w.message for w in report.warnings()]})
        queues.schedule(run.pk, run.stage)
    return run


def start_rebenchmark(user: AbstractBaseUser, kernel: Kernel) -> Run:
    """Measure a library kernel again: an evaluation of its verified source on its problem, whose timing joins the
    kernel's measurements whatever it shows (a kernel that got slower, or now fails, says so there). Its owner's
    action: another user's measurement would be of their own copy, so they evaluate it as their own candidate."""
    if kernel.owner_id != user.pk:
        raise Refused(f"Only the owner of kernel {kernel.pk} can re-benchmark it; to measure it yourself, evaluate "
                      "its source as your own candidate on the problem.")
    if kernel.device != settings.KSTUDIO_DEVICE:
        raise Refused(f"Kernel {kernel.pk} was measured on the {kernel.device} device and this studio evaluates on "
                      f"{settings.KSTUDIO_DEVICE} (KSTUDIO_DEVICE): a re-benchmark here would not be comparable.")
    return start_evaluation(user, kernel.problem, kernel.source, backend=kernel.backend or None, shared=kernel.shared,
                            rebenchmark_of=kernel.pk)


def candidate_of(run: Run, turn: int) -> Candidate:
    """The run's candidate of that turn; NotThere saying which turns the run has."""
    candidate = run.candidates.filter(turn=turn).first()
    if candidate is None:
        turns = list(run.candidates.order_by("turn").values_list("turn", flat=True))
        raise NotThere(f"Run {run.pk} has no candidate {turn}; its candidates are turns {turns or 'none yet'}.")
    return candidate


def start_profile(user: AbstractBaseUser, candidate: Candidate) -> Run:
    """"Profile this candidate": an evaluation of its source on its run's problem with the profiler on (ncu on a
    GPU host that has it, torch.profiler otherwise), whose verdict carries the profile table and the roofline. The
    new run is the user's own (private), so anyone who can see the candidate may profile it."""
    if not candidate.source.strip():
        raise Refused(f"Candidate {candidate.turn} of run {candidate.run_id} has no source to profile.")
    return start_evaluation(user, candidate.run.problem, candidate.source, backend=candidate.backend or None,
                            profile_of={"run": candidate.run_id, "turn": candidate.turn})


# Budgets a user may set on an agent run: name -> (type, the settings maximum it may not exceed).
AGENT_BUDGETS = {"turns": "KSTUDIO_AGENT_MAX_TURNS", "tokens": "KSTUDIO_AGENT_MAX_TOKENS",
                 "agent_wall_seconds": "KSTUDIO_AGENT_WALL_SECONDS"}


def agent_budgets(requested: dict[str, Any], *, gpu_left: float | None = None) -> dict[str, Any]:
    """The run's budgets: the studio's defaults (every one has a maximum), lowered where the user asked for
    less; the GPU seconds also to what the user's daily quota has left (`gpu_left`). Raises Refused
    naming the budget that is not a positive number."""
    gpu_max = settings.KSTUDIO_AGENT_MAX_GPU_SECONDS if gpu_left is None else min(settings.KSTUDIO_AGENT_MAX_GPU_SECONDS,
                                                                                 gpu_left)
    budgets: dict[str, Any] = {"wall_seconds": settings.KSTUDIO_CANDIDATE_WALL_SECONDS, "gpu_seconds": gpu_max}
    for name, setting in AGENT_BUDGETS.items():
        limit = getattr(settings, setting)
        value = requested.get(name)
        if value in (None, ""):
            budgets[name] = limit
            continue
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            raise Refused(f"The budget {name!r} must be a whole number, not {value!r}.") from None
        if number < 1:
            raise Refused(f"The budget {name!r} must be at least 1.")
        budgets[name] = min(number, limit)
    gpu = requested.get("gpu_seconds")
    if gpu not in (None, ""):
        try:
            budgets["gpu_seconds"] = float(gpu)
        except (TypeError, ValueError):
            raise Refused(f"The budget 'gpu_seconds' must be a number, not {gpu!r}.") from None
        if not math.isfinite(budgets["gpu_seconds"]) or budgets["gpu_seconds"] <= 0:
            raise Refused("The budget 'gpu_seconds' must be a positive number.")
        budgets["gpu_seconds"] = min(budgets["gpu_seconds"], gpu_max)
    return budgets


def start_agent_run(user: AbstractBaseUser, problem: Problem, endpoint: Any, *, budgets: dict[str, Any] | None = None,
                    instructions: str = "", shared: bool = False, device: str = "") -> Run:
    """"Optimize with the agent": queue the first model turn on `device` (empty: the studio's). The problem must
    have passed its checks."""
    if not validation.validate_problem(problem.source).ok:
        raise Refused("This problem has validation errors; fix and upload it again before optimizing it.")
    if problem.names != validation.ProblemNames():
        # The agent's prompt and tools speak KernelBench's names (Model, get_inputs, get_init_inputs).
        raise Refused("The agent works on problems that use KernelBench's names (Model, get_inputs, "
                      "get_init_inputs); rename them in the module, upload it again, then start the agent.")
    if problem.runtime_error:
        raise Refused(f"This problem failed when it was run: {problem.runtime_error[:500]}")
    if endpoint is None or not endpoint.enabled:
        raise Refused("Choose an enabled model for the agent (admins configure them under Model endpoints).")
    if device not in ("", "cpu", "cuda"):
        raise Refused(f"Unknown device {device!r}; choose cpu or cuda.")
    if len(instructions) > 20_000:
        raise Refused("The instructions are longer than 20,000 characters; shorten them.")
    with transaction.atomic():
        gpu_left = quotas.check_can_start(user)
        run = Run.objects.create(
            problem=problem, owner=user, kind=Run.Kind.AGENT, shared=shared, endpoint=endpoint, stage=Run.Stage.THINK,
            config={**default_config(), **({"device": device} if device else {}),
                    "policy": f"{endpoint.kind}:{endpoint.name}", "model": endpoint.model,
                    "endpoint": endpoint.name, "instructions": instructions},
            budgets=agent_budgets(budgets or {}, gpu_left=gpu_left))
        append_event(run.pk, "run_created", {"kind": run.kind, "problem": problem.name, "config": run.config,
                                             "budgets": run.budgets})
        queues.schedule(run.pk, run.stage)
    return run


def cancel_run(run: Run) -> bool:
    """Stop a run: a step still working finds the run terminal when it commits and discards its result.
    An agent run keeps what it had: its best kernel, its trajectory, its knowledge-base entries."""
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        if locked.is_terminal:
            return False
        if locked.kind == Run.Kind.AGENT and locked.agent_state is not None:
            locked.step_token, locked.step_claimed_at = "", None
            finish_agent_run(locked, agent_state.cancel(agent_state.AgentState.from_dict(locked.agent_state)))
            locked.save(update_fields=RUN_STATE_FIELDS)  # last_seq is append_event's
        else:
            Run.objects.filter(pk=run.pk).update(status=Run.Status.CANCELLED, finished_at=timezone.now(),
                                                 message="Cancelled by the user.", step_token="")
            append_event(run.pk, "run_finished", {"status": Run.Status.CANCELLED, "message": "Cancelled by the user."})
        finish_batch_if_done(run.pk)
    return True


def resume_unfinished_runs(release_claims: bool = False) -> int:
    """Re-queue the current step of every unfinished run. Called when a worker starts: with the embedded
    in-memory broker a restart loses queued messages; with Redis it shortens the wait for a dead worker's
    unacked message. Steps are idempotent (keyed on the run's stage and claim), so duplicates are harmless.
    `release_claims`: every claim standing now is a dead process's (the embedded studio, whose only worker lives and
    dies with it, starting again): the steps are taken over at once rather than after KSTUDIO_STEP_LEASE_SECONDS.
    A step still running somewhere then commits nothing, since its claim no longer holds (steps.py)."""
    if release_claims:
        unfinished_runs().exclude(step_token="").update(step_token="", step_claimed_at=None)
    count = 0
    for run_id, stage in unfinished_runs().values_list("id", "stage"):
        queues.enqueue(run_id, stage)
        count += 1
    return count
