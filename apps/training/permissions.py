"""Who may see and cancel training runs: the admin's permissions on the TrainingRun model, for its pages too
(/training/...), so a staff member whom the admin refuses is refused there as well."""
from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

VIEW = "training.view_trainingrun"
# Cancelling changes a run: the model's change permission (the admin's list action asks the same).
CHANGE = "training.change_trainingrun"


def can_view(user: AbstractBaseUser | AnonymousUser) -> bool:
    """As ModelAdmin.has_view_permission: the view or the change permission, for active staff."""
    return bool(user.is_active and user.is_staff and (user.has_perm(VIEW) or user.has_perm(CHANGE)))


def can_cancel(user: AbstractBaseUser | AnonymousUser) -> bool:
    return bool(user.is_active and user.is_staff and user.has_perm(CHANGE))


def requires(check: Callable[[Any], bool]) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Staff only (others go to the admin's login), then the permission `check` asks for (else 403)."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not check(request.user):
                raise PermissionDenied("You need the training runs permission an admin grants under Users.")
            return view(request, *args, **kwargs)

        return staff_member_required(checked)

    return decorator
