"""Reads of batches: what a user may see."""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from apps.batches.models import Batch


def visible_batches(user: AbstractBaseUser | AnonymousUser, *, mine: bool = False) -> QuerySet[Batch]:
    batches = Batch.objects.visible_to(user).select_related("owner", "endpoint")
    return batches.filter(owner=user) if mine else batches
