from __future__ import annotations

from django.db import models
from django.urls import reverse

from apps.accounts.privacy import Owned
from apps.runs.stored_verdict import StoredVerdict
from studio.storable import StorableJSONEncoder


class Run(Owned):
    """One session on a problem, advanced by short Celery tasks (apps/runs/steps.py); all state is here."""

    class Kind(models.TextChoices):
        EVALUATE = "evaluate", "evaluate my kernel"
        AGENT = "agent", "optimize with the agent"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"  # done; the candidate's verdict says whether it was accepted
        FAILED = "failed"  # could not finish: the problem is broken or a step failed for good
        CANCELLED = "cancelled"

    TERMINAL = (Status.FINISHED, Status.FAILED, Status.CANCELLED)

    class Stage(models.TextChoices):
        BUILD = "build"  # compile the candidate's extensions (build queue)
        EVALUATE = "evaluate"  # verify and benchmark (gpu queue)
        THINK = "think"  # agent run: the model's turn (agent queue)
        ACT = "act"  # agent run: one tool call of that turn (gpu queue)
        DONE = "done"

    # RESTRICT: a problem goes only with its runs (deleting its owner takes theirs; apps/problems/services.delete_problem
    # refuses while other users have runs or kernels on it), never by cascading into other users' work.
    problem = models.ForeignKey("problems.Problem", on_delete=models.RESTRICT, related_name="runs")
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.EVALUATE)
    config = models.JSONField(encoder=StorableJSONEncoder, default=dict, help_text="evaluation settings (EvalConfig fields)")
    budgets = models.JSONField(encoder=StorableJSONEncoder, default=dict, help_text="limits: wall seconds per evaluation, turns")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    stage = models.CharField(max_length=20, choices=Stage.choices, default=Stage.BUILD)
    message = models.TextField(blank=True, default="", help_text="why it failed, in words for the user")
    last_seq = models.PositiveIntegerField(default=0, help_text="seq of the newest event (allocation counter)")
    # The claim on the current step: a token per attempt, so a worker that lost its claim cannot commit.
    step_token = models.CharField(max_length=32, blank=True, default="")
    step_claimed_at = models.DateTimeField(null=True, blank=True)
    step_attempts = models.PositiveIntegerField(default=0)
    best_candidate = models.ForeignKey("runs.Candidate", null=True, blank=True, on_delete=models.SET_NULL,
                                       related_name="+")
    best_speedup = models.FloatField(null=True, blank=True)
    # Agent runs: the model, the loop's resumable state (agent.loop.runner.AgentState) and, once over, the
    # training record (agent.loop.trajectory.to_record).
    endpoint = models.ForeignKey("endpoints.ModelEndpoint", null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="runs")
    agent_state = models.JSONField(encoder=StorableJSONEncoder, null=True, blank=True)
    trajectory = models.JSONField(encoder=StorableJSONEncoder, null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"run {self.pk} on {self.problem_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.pk])

# What a step (or a cancel) changes on the run's row; last_seq is append_event's, updated in place.
RUN_STATE_FIELDS = ["status", "stage", "message", "step_token", "step_claimed_at", "best_candidate", "best_speedup",
                    "finished_at", "agent_state", "trajectory"]


class Event(models.Model):
    """What happened in a run, in order: `seq` is 1, 2, 3, ... per run with no gap (allocated under the run's row lock)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=40)
    payload = models.JSONField(encoder=StorableJSONEncoder, default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="event_unique_run_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.kind}"

    def to_message(self) -> dict[str, object]:
        return {"seq": self.seq, "kind": self.kind, "payload": self.payload, "at": self.created_at.isoformat()}


class Candidate(models.Model):
    """A ModelNew module tried in a run (turn 1 is the user's own in an "evaluate my kernel" run)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="candidates")
    turn = models.PositiveIntegerField()
    source = models.TextField()
    source_hash = models.CharField(max_length=64, db_index=True)
    backend = models.CharField(max_length=20, blank=True, default="")
    build = models.JSONField(encoder=StorableJSONEncoder, null=True, blank=True, help_text="the build step's report")
    verdict = models.JSONField(encoder=StorableJSONEncoder, null=True, blank=True, help_text="agent.engine.verdict.Verdict.to_dict()")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "turn"]
        constraints = [models.UniqueConstraint(fields=["run", "turn"], name="candidate_unique_run_turn")]

    def __str__(self) -> str:
        return f"run {self.run_id} turn {self.turn}"

    @property
    def stored_verdict(self) -> StoredVerdict | None:
        """The verdict read by name (None before the candidate is evaluated)."""
        return StoredVerdict.of(self.verdict)

    @property
    def status(self) -> str:
        return self.stored_verdict.status if self.verdict else "pending"
