from __future__ import annotations

from django.db import models
from django.urls import reverse

from apps.accounts.privacy import Owned
from studio.storable import StorableJSONEncoder


class Batch(Owned):
    """Many problems under one configuration (the agent's model, budgets, device): one run per problem,
    summed up as a paper's results table (apps/batches/services.report)."""

    class Kind(models.TextChoices):
        AGENT = "agent", "optimize with the agent"

    class Status(models.TextChoices):
        RUNNING = "running"  # some run is not over
        FINISHED = "finished"  # every run is over
        CANCELLED = "cancelled"

    name = models.CharField(max_length=200, blank=True, default="")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.AGENT)
    endpoint = models.ForeignKey("endpoints.ModelEndpoint", on_delete=models.PROTECT, related_name="batches")
    budgets = models.JSONField(encoder=StorableJSONEncoder, default=dict, help_text="what was asked for (each run "
                                                                                     "records the budgets it got)")
    device = models.CharField(max_length=20)
    instructions = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "batches"

    def __str__(self) -> str:
        return self.name or f"batch {self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("batches:detail", args=[self.pk])


class BatchItem(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    # A problem in a batch stays while the batch does: its row in the report would lose its meaning.
    problem = models.ForeignKey("problems.Problem", on_delete=models.PROTECT, related_name="batch_items")
    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="batch_item")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["batch", "position"]
        constraints = [models.UniqueConstraint(fields=["batch", "problem"], name="batch_item_unique_problem")]
        verbose_name = "batch item"

    def __str__(self) -> str:
        return f"{self.batch_id}#{self.position}"
