"""Reads of the kernel library: what a user may see, narrowed and ordered by the API's filters."""
from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet

from apps.kernels.models import Kernel

# The orderings a client may ask for, by their public name.
ORDERINGS = {"speedup": "speedup_vs_eager", "-speedup": "-speedup_vs_eager", "created": "created_at",
             "-created": "-created_at"}


def visible_kernels(user: AbstractBaseUser | AnonymousUser, *, mine: bool = False, problem: int | None = None,
                    problem_hash: str = "", device: str = "", backend: str = "", min_speedup: float | None = None,
                    hardware: str = "", ordering: str = "") -> QuerySet[Kernel]:
    """The kernels the user may read; `min_speedup` over eager; `hardware`: text in its description; `ordering`: one
    of ORDERINGS (the caller checks it)."""
    kernels = Kernel.objects.visible_to(user).select_related("owner", "problem", "candidate", "produced_by")
    if mine:
        kernels = kernels.filter(owner=user)
    if problem is not None:
        kernels = kernels.filter(problem_id=problem)
    for field, value in (("problem_hash", problem_hash), ("device", device), ("backend", backend)):
        if value:
            kernels = kernels.filter(**{field: value})
    if min_speedup is not None:
        kernels = kernels.filter(speedup_vs_eager__gte=min_speedup)
    if hardware:
        kernels = kernels.filter(hardware__icontains=hardware)
    if ordering:
        kernels = kernels.order_by(ORDERINGS[ordering], "-pk")
    return kernels
