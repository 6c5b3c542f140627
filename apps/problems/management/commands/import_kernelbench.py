from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.problems.kernelbench import import_levels


class Command(BaseCommand):
    help = ("Create problems from a KernelBench checkout you already have (KernelBench/level{N}/*.py). Each file is "
            "checked like an upload; invalid ones are skipped with the reason, ones you already have are left alone.")

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="the KernelBench checkout (or its KernelBench folder)")
        parser.add_argument("--level", type=int, help="only this level (default: every level folder)")
        parser.add_argument("--owner", required=True, help="the username that will own the problems")
        parser.add_argument("--shared", action="store_true", help="let every user see them")
        parser.add_argument("--limit", type=int, help="at most this many files")

    def handle(self, *args, path: Path, level: int | None, owner: str, shared: bool, limit: int | None, **options):
        try:
            user = get_user_model().objects.get(username=owner)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {owner!r}; create it first (manage.py createsuperuser).") from None
        try:
            done = import_levels(user, path.expanduser(), level=level, shared=shared, limit=limit)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for name, why in done.skipped:
            self.stderr.write(f"skipped {name}: {why}")
        self.stdout.write(f"created {len(done.created)}, already there {len(done.existing)}, skipped {len(done.skipped)}")
