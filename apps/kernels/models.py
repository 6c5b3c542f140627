from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from apps.accounts.privacy import Owned
from studio.storable import StorableJSONEncoder


class Kernel(Owned):
    """An accepted candidate with its provenance: what it solves, who and what made it, the evidence."""

    candidate = models.OneToOneField("runs.Candidate", on_delete=models.PROTECT, related_name="kernel")
    problem = models.ForeignKey("problems.Problem", on_delete=models.RESTRICT, related_name="kernels")  # as Run.problem
    name = models.CharField(max_length=200)
    source = models.TextField()
    source_hash = models.CharField(max_length=64, db_index=True)
    problem_hash = models.CharField(max_length=64, db_index=True)
    backend = models.CharField(max_length=20)
    device = models.CharField(max_length=20)
    # Who and what produced it: the user, the policy ("user" for a hand-written kernel), the model.
    produced_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    policy = models.CharField(max_length=100)
    model_name = models.CharField(max_length=200, blank=True, default="")
    trajectory = models.JSONField(encoder=StorableJSONEncoder, default=list, help_text="the run's events up to acceptance")
    toolchain = models.JSONField(encoder=StorableJSONEncoder, default=dict)
    hardware = models.JSONField(encoder=StorableJSONEncoder, default=dict)
    verification = models.JSONField(encoder=StorableJSONEncoder, default=dict, help_text="trials, flags, weights, stage")
    timing = models.JSONField(encoder=StorableJSONEncoder, default=dict)
    speedup_vs_eager = models.FloatField(null=True, blank=True)
    speedup_vs_compile = models.FloatField(null=True, blank=True)
    speedup_best_of = models.FloatField(null=True, blank=True, db_index=True,
                                        help_text="vs the faster of eager and torch.compile (eager when compile was not timed)")
    measurements = models.JSONField(encoder=StorableJSONEncoder, default=list, blank=True,
                                    help_text="every timing of this source on this hardware, oldest first")
    verified_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("kernels:detail", args=[self.pk])
