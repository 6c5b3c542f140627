"""`manage.py import_kernelbench PATH --owner NAME`: a KernelBench checkout's problems, each checked like an upload.

Under `make run` (the embedded default) the broker lives inside `serve`, so no worker can hear this command:
each file is checked in this process's own sandbox. With REDIS_URL the checks go to the `build` workers, and
the command says at once when none is listening rather than waiting on every file."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from apps.problems.kernelbench import import_levels, kernelbench_files
from apps.runs.engine import close_evaluator

# How long to wait for workers to answer a ping before deciding nobody serves the build queue.
_PING_SECONDS = 3.0


class Command(BaseCommand):
    help = ("Create problems from a KernelBench checkout you already have (KernelBench/level{N}/*.py). Each file is "
            "checked like an upload; invalid ones are skipped with the reason, ones you already have are left alone. "
            "KernelBench's problems have no get_input_variants(); add one to a problem to have other shapes checked "
            "and timed too.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, help="the KernelBench checkout (or its KernelBench folder)")
        parser.add_argument("--level", type=int, help="only this level (default: every level folder)")
        parser.add_argument("--owner", required=True, help="the username that will own the problems")
        parser.add_argument("--shared", action="store_true", help="let every user see them")
        parser.add_argument("--limit", type=int, help="at most this many files")
        parser.add_argument("--in-process", action="store_true",
                            help="check each file in this process's sandbox, not on a build worker (automatic "
                                 "without REDIS_URL, where no worker can hear this command)")

    def handle(self, *args: Any, path: Path, level: int | None, owner: str, shared: bool, limit: int | None,
               in_process: bool, **options: Any) -> None:
        try:
            user = get_user_model().objects.get(username=owner)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user {owner!r}; create it first (manage.py createsuperuser).") from None
        path = path.expanduser()
        try:
            files = kernelbench_files(path, level, limit)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        in_process = in_process or settings.EMBEDDED
        if not in_process and not _build_worker_listening():
            raise CommandError("No worker serves the build queue, so no file could be checked: start one "
                               "(celery -A studio worker -Q build) or pass --in-process.")
        # The raw stream under Django's wrapper: the wrapper ends every write with a newline, which breaks the bar.
        stream = self.stderr._out
        bar = tqdm(total=len(files), unit="file", desc="importing", file=stream, dynamic_ncols=True)

        def progress(name: str, outcome: str, why: str) -> None:
            if outcome == "skipped":
                bar.write(f"skipped {name}: {why}", file=stream)
            bar.update(1)

        try:
            done = import_levels(user, path, level=level, shared=shared, limit=limit, in_process=in_process,
                                 progress=progress)
        finally:
            bar.close()
            if in_process:
                close_evaluator()  # the sandbox's warm process this command started
        self.stdout.write(f"created {len(done.created)}, already there {len(done.existing)}, skipped "
                          f"{len(done.skipped)} in {bar.format_dict['elapsed']:.1f} s")


def _build_worker_listening() -> bool:
    from studio.celery import app

    queues = app.control.inspect(timeout=_PING_SECONDS).active_queues() or {}
    return any(q.get("name") == "build" for served in queues.values() for q in served)
