"""A staged training run launched by an admin (DESIGN §8): its settings, its progress as the trainer reports it
(metrics rows, a capped log tail), and the model endpoint its checkpoint became."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse


class TrainingRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        CANCELLING = "cancelling"  # asked to stop; the train worker kills the trainer's process group
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    TERMINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    name = models.CharField(max_length=80, blank=True, default="", help_text="a label for lists and the endpoint's name")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="training_runs",
                              help_text="who launched it (the run and its checkpoint outlive the account)")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    config = models.JSONField(help_text="trainer.config.PipelineConfig as plain data (what config.yaml holds)")
    data_filters = models.JSONField(default=dict, help_text="which trajectories and problems the run trains on")
    num_processes = models.PositiveSmallIntegerField(default=1, help_text="accelerate processes (GPUs) of the run")
    output_dir = models.CharField(max_length=500, blank=True, default="", help_text="the trainer's OUT_DIR")
    data_summary = models.JSONField(default=dict, blank=True, help_text="what the export wrote: counts of rows")
    log_tail = models.TextField(blank=True, default="", help_text="the end of the trainer's stdout and stderr")
    error = models.TextField(blank=True, default="")
    result = models.JSONField(null=True, blank=True, help_text="the trainer's result.json")
    endpoint = models.ForeignKey("endpoints.ModelEndpoint", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+", help_text="the checkpoint, registered for agent runs")
    celery_task_id = models.CharField(max_length=64, blank=True, default="")
    worker_host = models.CharField(max_length=200, blank=True, default="", help_text="where the trainer runs")
    pid = models.PositiveIntegerField(null=True, blank=True, help_text="the trainer's process (and group) id")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"training {self.pk}" + (f" ({self.name})" if self.name else "")

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def stages(self) -> list[str]:
        return list(self.config.get("stages", []))

    def get_absolute_url(self) -> str:
        return reverse("training:detail", args=[self.pk])


class TrainingMetric(models.Model):
    """One line of the trainer's metrics.jsonl: a logged optimizer step of one stage."""

    run = models.ForeignKey(TrainingRun, on_delete=models.CASCADE, related_name="metrics")
    stage = models.CharField(max_length=40)
    step = models.IntegerField()
    loss = models.FloatField(null=True, blank=True)
    reward = models.FloatField(null=True, blank=True)
    logged_at = models.FloatField(help_text="the trainer's clock, unix seconds")
    values = models.JSONField(default=dict, help_text="every other value the trainer logged")

    class Meta:
        ordering = ["id"]
