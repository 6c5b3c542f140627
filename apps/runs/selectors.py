"""Reads of runs: what a user may see (with the best kernel's id, for lists), the unfinished ones a worker resumes,
and the agent runs whose trajectories become training data (one rule for `export_trajectories` and training)."""
from __future__ import annotations

import datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import OuterRef, Q, QuerySet, Subquery

from apps.kernels.models import Kernel
from apps.runs.models import Run


def visible_runs(user: AbstractBaseUser | AnonymousUser, *, mine: bool = False, problem: int | None = None,
                 status: str = "", kind: str = "") -> QuerySet[Run]:
    """The runs the user may read, each with `best_kernel_id` (the library's kernel of its best candidate, if any:
    one query for a whole list, not one per run)."""
    runs = Run.objects.visible_to(user).select_related("owner", "problem", "best_candidate").annotate(
        best_kernel_id=Subquery(Kernel.objects.filter(candidate=OuterRef("best_candidate")).order_by("pk").values("pk")[:1]))
    if mine:
        runs = runs.filter(owner=user)
    if problem is not None:
        runs = runs.filter(problem_id=problem)
    if status:
        runs = runs.filter(status=status)
    if kind:
        runs = runs.filter(kind=kind)
    return runs


def unfinished_runs() -> QuerySet[Run]:
    return Run.objects.exclude(status__in=Run.TERMINAL)


def trajectory_runs(*, owner: str = "", since: datetime.date | None = None, only_accepted: bool = False,
                    min_reward: float | None = None, statuses: list[str] | None = None) -> QuerySet[Run]:
    """The agent runs whose stored trajectory (agent.loop.trajectory's record) passes every filter given, oldest first.
    The filters run in the database, so counting them loads no trajectory.

    owner: a username; since: created on or after; only_accepted: the run ended with a kernel the library kept;
    min_reward: a final reward at least this; statuses: the agent ended so (submitted, stopped, failed, cancelled)."""
    runs = Run.objects.filter(kind=Run.Kind.AGENT, trajectory__isnull=False).order_by("pk")
    if owner:
        runs = runs.filter(owner__username=owner)
    if since is not None:
        runs = runs.filter(created_at__date__gte=since)
    if only_accepted:
        # What the library kept (agent.knowledge.library's rule); a record older than that rule has no "kept" and goes by
        # its reward.
        runs = runs.filter(trajectory__final_reward__gt=0).filter(
            Q(trajectory__kept=True) | ~Q(trajectory__has_key="kept"))
    if min_reward is not None:
        runs = runs.filter(trajectory__final_reward__gte=min_reward)
    if statuses:
        runs = runs.filter(trajectory__status__in=statuses)
    return runs
