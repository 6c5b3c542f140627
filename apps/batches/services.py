"""Batch jobs: many problems under one configuration, one agent run each, and the results table a paper
would print (KernelBench's correctness rate and fast_p, geometric-mean speedups)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.batches.models import Batch, BatchItem
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.problems.services import UploadRejected
from apps.runs.models import Event, Run
from apps.runs.services import cancel_run, start_agent_run

# KernelBench's thresholds: fast_p is the share of problems whose kernel is correct and more than p times
# as fast as eager PyTorch (fast_0 is "correct and faster than nothing": every correct, timed kernel).
FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
DEVICES = ("cpu", "cuda")
MAX_PROBLEMS = 500


@dataclass
class RunConfig:
    """One configuration for an agent run (and for every run of a batch)."""

    endpoint: ModelEndpoint
    budgets: dict[str, Any]
    device: str = ""  # empty: the studio's KSTUDIO_DEVICE
    instructions: str = ""
    shared: bool = False

    def __post_init__(self) -> None:
        self.device = self.device or settings.KSTUDIO_DEVICE
        if self.device not in DEVICES:
            raise UploadRejected(f"Unknown device {self.device!r}; choose cpu or cuda.")


def start_configured_run(user: AbstractBaseUser, problem: Problem, config: RunConfig) -> Run:
    """An agent run on the configuration's device. start_agent_run takes the studio's device; a different
    one is written before the run's first step is queued (steps are queued when the transaction commits)."""
    with transaction.atomic():
        run = start_agent_run(user, problem, config.endpoint, config.budgets, instructions=config.instructions,
                              shared=config.shared)
        if run.config["device"] != config.device:
            run.config = {**run.config, "device": config.device}
            run.save(update_fields=["config"])
            first = Event.objects.get(run=run, seq=1)
            first.payload = {**first.payload, "config": run.config}
            first.save(update_fields=["payload"])
    return run


def start_batch(user: AbstractBaseUser, problems: list[Problem], config: RunConfig, name: str = "") -> Batch:
    """One run per problem, all or nothing: a problem the agent cannot take fails the batch, named."""
    if not problems:
        raise UploadRejected("A batch needs at least one problem.")
    if len(problems) > MAX_PROBLEMS:
        raise UploadRejected(f"A batch takes at most {MAX_PROBLEMS} problems, not {len(problems)}; split it.")
    if len({p.pk for p in problems}) != len(problems):
        raise UploadRejected("A problem is listed twice; list each problem once.")
    with transaction.atomic():
        batch = Batch.objects.create(owner=user, name=name[:200], endpoint=config.endpoint, budgets=config.budgets,
                                     device=config.device, instructions=config.instructions, shared=config.shared)
        for position, problem in enumerate(problems):
            try:
                run = start_configured_run(user, problem, config)
            except UploadRejected as exc:
                raise UploadRejected(f"Problem {problem.pk} ({problem.name}): {exc.message}") from None
            BatchItem.objects.create(batch=batch, problem=problem, run=run, position=position)
    return batch


def progress(batch: Batch) -> dict[str, Any]:
    """How many runs are in each state; marks the batch finished once every run is over."""
    statuses = list(Run.objects.filter(batch_item__batch=batch).values_list("status", flat=True))
    counts = {status: statuses.count(status) for status in Run.Status.values}
    done = sum(counts[s] for s in Run.TERMINAL)
    if batch.status == Batch.Status.RUNNING and statuses and done == len(statuses):
        batch.status, batch.finished_at = Batch.Status.FINISHED, timezone.now()
        Batch.objects.filter(pk=batch.pk, status=Batch.Status.RUNNING).update(status=batch.status,
                                                                              finished_at=batch.finished_at)
    return {"total": len(statuses), "done": done, "counts": counts, "status": batch.status}


def cancel_batch(batch: Batch) -> int:
    """Cancel every run still going; returns how many were."""
    cancelled = sum(cancel_run(item.run) for item in batch.items.select_related("run"))
    Batch.objects.filter(pk=batch.pk).exclude(status=Batch.Status.FINISHED).update(
        status=Batch.Status.CANCELLED, finished_at=timezone.now())
    batch.refresh_from_db()
    return cancelled


@dataclass
class Row:
    """One problem's line of the table."""

    position: int
    problem_id: int
    problem: str
    run_id: int
    run_status: str
    verdict: str  # the best kernel's verdict ("accepted"), else the last candidate's, else the run's state
    correct: bool
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    kernel_id: int | None


def rows(batch: Batch) -> list[Row]:
    items = list(batch.items.select_related("problem", "run__best_candidate").order_by("position"))
    kernels = dict(Kernel.objects.filter(candidate__run__batch_item__batch=batch).values_list("candidate_id", "pk"))
    table = []
    for item in items:
        run, best = item.run, item.run.best_candidate
        verdict = (best.verdict or {}) if best else {}
        correct = verdict.get("status") == "accepted" and bool(verdict.get("correct"))
        timing = verdict.get("timing") or {}
        if best is None:
            last = run.candidates.exclude(verdict=None).order_by("-turn").first()
            state = last.verdict.get("status", "pending") if last else (run.status if run.is_terminal else "pending")
        else:
            state = verdict.get("status", "pending")
        table.append(Row(position=item.position, problem_id=item.problem_id, problem=item.problem.name, run_id=run.pk,
                         run_status=run.status, verdict=state, correct=correct,
                         speedup_vs_eager=timing.get("speedup_vs_eager") if correct else None,
                         speedup_vs_compile=timing.get("speedup_vs_compile") if correct else None,
                         kernel_id=kernels.get(best.pk) if best else None))
    return table


def fast_p_key(p: float) -> str:
    return f"{p:g}"


def geometric_mean(values: list[float]) -> float | None:
    positive = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None


def summarize(table: list[Row]) -> dict[str, Any]:
    """KernelBench's figures over every problem of the batch (an unfinished or failed run counts as not correct)."""
    n = len(table)
    correct = [r for r in table if r.correct]
    return {
        "problems": n,
        "finished": sum(r.run_status in Run.TERMINAL for r in table),
        "correct": len(correct),
        "correctness_rate": len(correct) / n if n else 0.0,
        "fast_p": {fast_p_key(p): (sum(1 for r in correct if (r.speedup_vs_eager or 0) > p) / n if n else 0.0)
                   for p in FAST_P},
        "geomean_speedup_vs_eager": geometric_mean([r.speedup_vs_eager for r in correct]),
        "geomean_speedup_vs_compile": geometric_mean([r.speedup_vs_compile for r in correct]),
    }


def report(batch: Batch) -> dict[str, Any]:
    table = rows(batch)
    return {"batch": batch.pk, "name": batch.name, "status": progress(batch)["status"],
            "configuration": configuration(batch), "rows": [asdict(r) for r in table], "summary": summarize(table)}


def configuration(batch: Batch) -> dict[str, Any]:
    return {"kind": batch.kind, "endpoint": batch.endpoint.name, "policy": f"{batch.endpoint.kind}:{batch.endpoint.name}",
            "model": batch.endpoint.model, "budgets": batch.budgets, "device": batch.device,
            "instructions": batch.instructions}
