"""Per-user quotas on runs, from settings: how many runs a user has in flight (queued or running), how many are
still queued, and how many GPU seconds their runs used over the past 24 hours. Starting a run past one of them
raises QuotaExceeded, which the API answers with 429 and the pages with a 429 page, the limit named."""
from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from apps.core.errors import QuotaExceeded
from apps.runs.models import Candidate, Run
from apps.runs.stored_verdict import StoredVerdict


def gpu_seconds_today(user: AbstractBaseUser) -> float:
    """The device seconds the user's runs started in the past 24 hours have used: an agent run's own count,
    an evaluation's from its candidates' verdicts."""
    since = timezone.now() - timedelta(days=1)
    runs = Run.objects.filter(owner=user, created_at__gte=since)
    used = sum(float((state or {}).get("gpu_seconds") or 0.0)
               for state in runs.filter(kind=Run.Kind.AGENT).values_list("agent_state", flat=True))
    for verdict in Candidate.objects.filter(run__in=runs.filter(kind=Run.Kind.EVALUATE)).values_list("verdict", flat=True):
        used += StoredVerdict(verdict or {}).device_seconds()
    return used


def check_can_start(user: AbstractBaseUser, runs: int = 1) -> float:
    """Raise QuotaExceeded unless the user may start `runs` more runs now; returns the GPU seconds left today.
    Call it inside the transaction that creates the runs: it locks the user's row, so two requests of one user
    cannot both pass the check on the same count."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("check_can_start must run inside the transaction that creates the runs")
    get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    unfinished = Run.objects.filter(owner=user).exclude(status__in=Run.TERMINAL)
    in_flight = unfinished.count()
    queued = unfinished.filter(status=Run.Status.QUEUED).count()
    limit = settings.KSTUDIO_QUOTA_RUNS_IN_FLIGHT
    if in_flight + runs > limit:
        raise QuotaExceeded(f"You have {in_flight} runs in flight (queued or running); the studio allows {limit} a user"
                            f"{_asking(runs)}. Wait for some to finish or cancel some, then try again.")
    limit = settings.KSTUDIO_QUOTA_QUEUED_RUNS
    if queued + runs > limit:
        raise QuotaExceeded(f"You have {queued} runs queued, not started yet; the studio allows {limit} a user"
                            f"{_asking(runs)}. Wait for some to start or cancel some, then try again.")
    left = settings.KSTUDIO_QUOTA_GPU_SECONDS_PER_DAY - gpu_seconds_today(user)
    if left <= 0:
        raise QuotaExceeded(f"Your runs used {settings.KSTUDIO_QUOTA_GPU_SECONDS_PER_DAY:g} GPU seconds in the past 24 "
                            "hours, your daily quota; try again once older runs fall out of that window.")
    return left


def _asking(runs: int) -> str:
    return f" (this request starts {runs})" if runs > 1 else ""
