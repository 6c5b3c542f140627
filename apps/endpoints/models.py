from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models


class ModelEndpoint(models.Model):
    """A model the agent can run on, configured by an admin and chosen per run.

    The API key is never stored: `api_key_env` names the environment variable of the worker that
    holds it, so keys stay in the deployment's secrets and out of the database and its backups."""

    class Kind(models.TextChoices):
        BUILTIN = "builtin", "built-in kernel templates (no model)"
        OPENAI = "openai", "OpenAI-compatible endpoint (vLLM, transformers serve, hosted)"
        TRANSFORMERS = "transformers", "local transformers checkpoint"
        SCRIPTED = "scripted", "scripted turns (deterministic tests and demos)"

    name = models.CharField(max_length=100, unique=True, help_text="what users pick when they start a run")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.OPENAI)
    base_url = models.CharField(max_length=500, blank=True, default="",
                                help_text="openai: the API root with its version, e.g. http://gpu-host:8001/v1")
    model = models.CharField(max_length=500, blank=True, default="",
                             help_text="openai: the served model name; transformers: the checkpoint directory")
    api_key_env = models.CharField(max_length=100, blank=True, default="",
                                   help_text="openai: the environment variable holding the API key (empty: no key)")
    temperature = models.FloatField(default=0.2)
    max_tokens = models.PositiveIntegerField(default=4096, help_text="completion tokens per turn")
    timeout_seconds = models.FloatField(default=300.0, help_text="longest wait for the server's next bytes")
    retries = models.PositiveSmallIntegerField(default=3, help_text="further attempts on connection errors, 429 and 5xx")
    script = models.JSONField(default=list, blank=True,
                              help_text='scripted: a list of turns, each {"text": "...", "tool_calls": '
                                        '[{"name": "write_candidate", "arguments": {...}}]}')
    enabled = models.BooleanField(default=True)
    notes = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        problems: dict[str, str] = {}
        if self.kind == self.Kind.OPENAI:
            if not self.base_url.startswith(("http://", "https://")):
                problems["base_url"] = "An OpenAI-compatible endpoint needs a base URL starting with http:// or https://."
            if not self.model:
                problems["model"] = "Name the model the endpoint serves (vLLM's --served-model-name)."
        elif self.kind == self.Kind.TRANSFORMERS and not self.model:
            problems["model"] = "Give the checkpoint directory on the agent workers."
        elif self.kind == self.Kind.SCRIPTED:
            error = script_error(self.script)
            if error:
                problems["script"] = error
        if not 0 <= self.temperature <= 2:
            problems["temperature"] = "Temperature must be between 0 and 2."
        if self.timeout_seconds <= 0:
            problems["timeout_seconds"] = "The timeout must be positive."
        if problems:
            raise ValidationError(problems)


def script_error(script: Any) -> str:
    """Why a scripted endpoint's turns are unusable, or "" when they are fine."""
    if not isinstance(script, list) or not script:
        return "A scripted endpoint needs a non-empty list of turns."
    for i, turn in enumerate(script, 1):
        if not isinstance(turn, dict):
            return f"Turn {i} must be an object with 'text' and 'tool_calls'."
        calls = turn.get("tool_calls", [])
        if not isinstance(turn.get("text", ""), str) or not isinstance(calls, list):
            return f"Turn {i}: 'text' must be a string and 'tool_calls' a list."
        for call in calls:
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                return f"Turn {i}: each tool call needs a 'name' (and 'arguments', an object or a string)."
    return ""
