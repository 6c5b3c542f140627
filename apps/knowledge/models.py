from __future__ import annotations

import hashlib
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from django.db.models import Q

from agent.knowledge import MODEL_NAME
from agent.knowledge import Signature, entry_text
from agent.knowledge import SLOWER
from agent.engine import Status
from apps.accounts.privacy import Owned, OwnedQuerySet
from studio.storable import StorableJSONEncoder

# No owner: curated by an admin, for everyone.
CURATED = Q(owner__isnull=True)


class EntryQuerySet(OwnedQuerySet):
    def visible_to(self, user: AbstractBaseUser | AnonymousUser) -> EntryQuerySet:
        """Pages: staff see everything; others their own, the shared and the curated entries."""
        if user.is_authenticated and user.is_staff:
            return self
        return self.offered_to(user)

    def offered_to(self, user: AbstractBaseUser | AnonymousUser) -> EntryQuerySet:
        """What the agent may read on a user's behalf: their own, the shared and the curated entries. No staff
        exception: what the agent reads lands in the model's context and the run's trajectory, which can be shared."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(shared=True) | CURATED)


class Entry(Owned):
    """One lesson from a run (agent.knowledge.lessons), or one written by an admin: what was tried on which kind
    of problem, and what it did."""

    # Owned's trio, but an entry may have no owner (curated by an admin), and sharing means something more here.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="knowledge_entries", help_text="empty: curated, offered to everyone")
    shared = models.BooleanField(default=False, help_text="offered to every user's agent, not only the owner's")
    run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.SET_NULL,
                            related_name="knowledge_entries", help_text="the run it was distilled from")
    turn = models.PositiveIntegerField(null=True, blank=True, help_text="the run's turn that wrote the candidate")
    problem_hash = models.CharField(max_length=64, blank=True, default="", db_index=True)
    signature = models.JSONField(encoder=StorableJSONEncoder, default=dict, blank=True,
                                 help_text='the problem\'s signature: {"ops": [...], "shapes": [[...]], "dtypes": [...]}')
    ops = models.CharField(max_length=500, blank=True, default="", editable=False,
                           help_text="the signature's ops, space-joined (kept in step with it, for search)")
    device = models.CharField(max_length=20, blank=True, default="")
    backend = models.CharField(max_length=20, blank=True, default="")
    title = models.CharField(max_length=300)
    body = models.TextField(blank=True, default="", help_text="what was tried and what it did, as the model reads it")
    status = models.CharField(max_length=20, blank=True, default="",
                              choices=[(s.value, s.value) for s in Status] + [(SLOWER, SLOWER)],
                              help_text="the verdict's status; slower_than_pytorch: correct, but not worth keeping")
    speedup_vs_eager = models.FloatField(null=True, blank=True)
    speedup_vs_compile = models.FloatField(null=True, blank=True)
    profile = models.JSONField(encoder=StorableJSONEncoder, null=True, blank=True, help_text="top kernels of the profile, when one was taken")
    # The entry's text as a sentence embedding (agent.knowledge.embeddings), for ranking by meaning. A plain JSON list: this
    # Postgres has no pgvector, and the ranking reads a bounded pool (apps.knowledge.services.POOL_SIZE) anyway.
    embedding = models.JSONField(null=True, blank=True, editable=False,
                                 help_text="the entry's text embedded (384 floats); recomputed when the text changes")
    embedding_model = models.CharField(max_length=100, blank=True, default="", editable=False,
                                       help_text="the model that computed the embedding")
    embedding_digest = models.CharField(max_length=64, blank=True, default="", editable=False,
                                        help_text="sha256 of the model name and the text embedded: a changed text is re-embedded")
    updated_at = models.DateTimeField(auto_now=True)

    objects = EntryQuerySet.as_manager()

    class Meta:
        ordering = ["-updated_at"]
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return self.title

    def save(self, *args: Any, **kwargs: Any) -> None:
        # The admin edits the signature as JSON; the searchable ops follow it.
        self.ops = " ".join(Signature.from_dict(self.signature).ops)[:500]
        super().save(*args, **kwargs)

    def as_entry(self) -> dict[str, Any]:
        """The plain dict agent.knowledge ranks and formats, with the pk to find the row again, and the embedding
        while it is the current model's embedding of the current text."""
        fields = {"pk": self.pk, "title": self.title, "body": self.body, "status": self.status,
                  "speedup_vs_eager": self.speedup_vs_eager, "speedup_vs_compile": self.speedup_vs_compile,
                  "backend": self.backend, "device": self.device, "signature": self.signature,
                  "profile": self.profile, "turn": self.turn}
        if self.embedding and self.embedding_digest == text_digest(fields):
            fields["embedding"] = self.embedding
        return fields

    def set_embedding(self, vector: list[float]) -> None:
        """Keep `vector` as the embedding of the entry's text as it is now."""
        self.embedding, self.embedding_model = vector, MODEL_NAME
        self.embedding_digest = text_digest(self.as_entry())


def text_digest(fields: dict[str, Any]) -> str:
    """What an embedding was computed from: the model and the entry's text (agent.knowledge.ranking.entry_text)."""
    return hashlib.sha256(f"{MODEL_NAME}\n{entry_text(fields)}".encode()).hexdigest()
