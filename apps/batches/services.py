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

from agent.knowledge import best_of_speedup
from apps.batches.models import Batch, BatchItem
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.core.errors import Refused
from apps.problems.services import check_problem, store_problem
from apps.runs import quotas
from apps.runs.models import Run
from apps.runs.stored_verdict import StoredVerdict
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
            raise Refused(f"Unknown device {self.device!r}; choose cpu or cuda.")


def start_configured_run(user: AbstractBaseUser, problem: Problem, config: RunConfig) -> Run:
    """An agent run under the configuration, on its device."""
    return start_agent_run(user, problem, config.endpoint, budgets=config.budgets, instructions=config.instructions,
                           shared=config.shared, device=config.device)


def start_batch(user: AbstractBaseUser, problems: list[Problem], config: RunConfig, *, name: str = "") -> Batch:
    """One run per problem, all or nothing: a problem the agent cannot take fails the batch, named."""
    if not problems:
        raise Refused("A batch needs at least one problem.")
    if len(problems) > MAX_PROBLEMS:
        raise Refused(f"A batch takes at most {MAX_PROBLEMS} problems, not {len(problems)}; split it.")
    if len({p.pk for p in problems}) != len(problems):
        raise Refused("A problem is listed twice; list each problem once.")
    with transaction.atomic():
        quotas.check_can_start(user, runs=len(problems))
        batch = Batch.objects.create(owner=user, name=name[:200], endpoint=config.endpoint, budgets=config.budgets,
                                     device=config.device, instructions=config.instructions, shared=config.shared)
        for position, problem in enumerate(problems):
            try:
                run = start_configured_run(user, problem, config)
            except Refused as exc:
                raise Refused(f"Problem {problem.pk} ({problem.name}): {exc.message}") from None
            BatchItem.objects.create(batch=batch, problem=problem, run=run, position=position)
    return batch


def create_batch(user: AbstractBaseUser, problems: list[Problem], sources: list[dict[str, str]], config: RunConfig, *,
                 name: str = "") -> Batch:
    """A batch over existing problems plus new ones from `sources` ({name, source}). Each source is checked in the
    sandbox first, outside any transaction (a check waits on a worker for up to a minute); then the new problems,
    the batch and its runs are stored in one short transaction. A source that fails its check creates nothing."""
    limit = settings.KSTUDIO_BATCH_MAX_SOURCES
    if len(sources) > limit:
        raise Refused(f"A batch takes at most {limit} new sources, not {len(sources)}; upload the others as "
                      "problems first (POST /api/v1/problems/) and list their ids.")
    checked = [check_problem(item["name"], item["source"]) for item in sources]
    with transaction.atomic():
        made = [store_problem(user, c) for c in checked]
        return start_batch(user, [*problems, *made], config, name=name)


def progress(batch: Batch) -> dict[str, Any]:
    """How many runs are in each state (the batch is marked finished where its last run ends: completion.py)."""
    statuses = list(Run.objects.filter(batch_item__batch=batch).values_list("status", flat=True))
    counts = {status: statuses.count(status) for status in Run.Status.values}
    done = sum(counts[s] for s in Run.TERMINAL)
    return {"total": len(statuses), "done": done, "counts": counts, "status": batch.status}


def stages(batch: Batch) -> dict[int, dict[str, Any]]:
    """Each problem's run as it stands, by position: status, stage, candidates evaluated, the latest event's kind.
    What a watcher (the batch page, studio-cli) shows from the first second, before any verdict."""
    items = batch.items.select_related("run").order_by("position")
    return {item.position: {"run": item.run_id, "status": item.run.status, "stage": item.run.stage,
                            "candidates": item.run.candidates.count(), "last_seq": item.run.last_seq}
            for item in items}


def cancel_batch(batch: Batch) -> int:
    """Cancel every run still going; returns how many were. The batch is marked cancelled first, so its last run
    ending does not mark it finished."""
    Batch.objects.filter(pk=batch.pk).exclude(status=Batch.Status.FINISHED).update(
        status=Batch.Status.CANCELLED, finished_at=timezone.now())
    cancelled = sum(cancel_run(item.run) for item in batch.items.select_related("run"))
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
    speedup_vs_best: float | None  # the headline: against the faster of eager and torch.compile
    speedup_vs_eager: float | None
    speedup_vs_compile: float | None
    sol_fraction: float | None  # the kernel's share of the device's speed of light for the problem's work
    kernel_id: int | None


def rows(batch: Batch) -> list[Row]:
    items = list(batch.items.select_related("problem", "run__best_candidate").order_by("position"))
    kernels = dict(Kernel.objects.filter(candidate__run__batch_item__batch=batch).values_list("candidate_id", "pk"))
    table = []
    for item in items:
        run, best = item.run, item.run.best_candidate
        verdict = StoredVerdict((best.verdict or {}) if best else {})
        correct = verdict.accepted and verdict.correct
        if best is None:
            last = run.candidates.exclude(verdict=None).order_by("-turn").first()
            state = StoredVerdict(last.verdict).status if last else (run.status if run.is_terminal else "pending")
        else:
            state = verdict.status
        table.append(Row(position=item.position, problem_id=item.problem_id, problem=item.problem.name, run_id=run.pk,
                         run_status=run.status, verdict=state, correct=correct,
                         speedup_vs_best=_best_of(verdict.timing or {}) if correct else None,
                         speedup_vs_eager=verdict.speedup_vs_eager if correct else None,
                         speedup_vs_compile=verdict.speedup_vs_compile if correct else None,
                         sol_fraction=(verdict.timing or {}).get("sol_fraction") if correct else None,
                         kernel_id=kernels.get(best.pk) if best else None))
    return table


def _best_of(timing: dict[str, Any]) -> float | None:
    """The verdict's own best-of figure (paired per round); for a verdict from before it had one, the smaller of its
    two speedups."""
    if timing.get("speedup_vs_best") is not None:
        return timing["speedup_vs_best"]
    return best_of_speedup(timing.get("speedup_vs_eager"), timing.get("speedup_vs_compile"))


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
        # The same against the faster of eager and torch.compile (Helion, KernelBench v3): the headline.
        "fast_p_vs_best": {fast_p_key(p): (sum(1 for r in correct if (r.speedup_vs_best or 0) > p) / n if n else 0.0)
                           for p in FAST_P},
        "geomean_speedup_vs_best": geometric_mean([r.speedup_vs_best for r in correct]),
        "geomean_speedup_vs_eager": geometric_mean([r.speedup_vs_eager for r in correct]),
        "geomean_speedup_vs_compile": geometric_mean([r.speedup_vs_compile for r in correct]),
        "geomean_sol_fraction": geometric_mean([r.sol_fraction for r in correct]),
    }


def report(batch: Batch) -> dict[str, Any]:
    table = rows(batch)
    return {"batch": batch.pk, "name": batch.name, "status": progress(batch)["status"],
            "configuration": configuration(batch), "rows": [asdict(r) for r in table], "summary": summarize(table)}


def configuration(batch: Batch) -> dict[str, Any]:
    return {"kind": batch.kind, "endpoint": batch.endpoint.name, "policy": f"{batch.endpoint.kind}:{batch.endpoint.name}",
            "model": batch.endpoint.model, "budgets": batch.budgets, "device": batch.device,
            "instructions": batch.instructions}
