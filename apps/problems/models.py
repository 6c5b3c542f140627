from __future__ import annotations

from django.db import models
from django.urls import reverse

from agent.engine import ProblemNames
from apps.accounts.privacy import Owned


class Origin(models.TextChoices):
    UPLOADED = "uploaded", "uploaded"
    KERNELBENCH = "kernelbench", "KernelBench import"
    SYNTHETIC = "synthetic", "synthesized"  # composed from seed ops by trainer.synthesis


class Problem(Owned):
    """An uploaded module in KernelBench's format. Untrusted: the web process only parses it."""

    name = models.CharField(max_length=200)
    source = models.TextField()
    source_hash = models.CharField(max_length=64, db_index=True, help_text="sha256 of the UTF-8 source")
    # The names the module uses (the upload form can map others onto Model/get_inputs/get_init_inputs).
    model_name = models.CharField(max_length=100, default="Model")
    get_inputs_name = models.CharField(max_length=100, default="get_inputs")
    get_init_inputs_name = models.CharField(max_length=100, default="get_init_inputs")
    validation = models.JSONField(default=dict, help_text="agent.engine.validation's report (AST only)")
    # Set when a run found the module failing in the sandbox (import crash, hang): shown on its page.
    runtime_error = models.TextField(blank=True, default="")
    origin = models.CharField(max_length=16, choices=Origin.choices, default=Origin.UPLOADED, db_index=True,
                              help_text="how the problem came in: a user's upload, a KernelBench import, or synthesis")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("problems:detail", args=[self.pk])

    @property
    def names(self) -> ProblemNames:
        return ProblemNames(self.model_name, self.get_inputs_name, self.get_init_inputs_name)
