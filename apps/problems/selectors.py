"""Reads of problems: what a user may see, narrowed by the API's filters."""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from apps.problems.models import Problem


def visible_problems(user: AbstractBaseUser | AnonymousUser, *, mine: bool = False, source_hash: str = "",
                     name: str = "") -> QuerySet[Problem]:
    """The problems the user may read (own, shared, all for staff); `mine`: only their own; `name`: a part of it."""
    problems = Problem.objects.visible_to(user).select_related("owner")
    if mine:
        problems = problems.filter(owner=user)
    if source_hash:
        problems = problems.filter(source_hash=source_hash)
    if name:
        problems = problems.filter(name__icontains=name)
    return problems
