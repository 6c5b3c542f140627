"""Who may see what: everything a user makes is private to them and to staff unless it is shared.
Pages, websockets and downloads all ask here, so the rule lives in one place."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models
from django.db.models import Q


class OwnedQuerySet(models.QuerySet):
    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> OwnedQuerySet:
        if not user.is_authenticated:
            return self.none()
        if user.is_staff:
            return self
        return self.filter(Q(owner=user) | Q(shared=True))

    def owned_by(self, user: AbstractBaseUser | AnonymousUser) -> OwnedQuerySet:
        """What the user may change: their own things (staff: everything)."""
        if not user.is_authenticated:
            return self.none()
        return self if user.is_staff else self.filter(owner=user)


class Owned(models.Model):
    """Something a user makes (a problem, a run, a kernel, a batch, a knowledge entry): private to its owner and to
    staff unless shared. The owner reaches them by the app's name (user.problems, user.runs, ...)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="%(app_label)s")
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        abstract = True
