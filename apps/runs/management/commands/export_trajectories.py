"""`python manage.py export_trajectories OUT_DIR [--owner NAME] [--min-reward R] [--status S ...] [--jsonl FILE]`

The stored agent runs as a Hugging Face `datasets` dataset (agent/export/dataset.py), the trainer's input."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agent.export import save, write_jsonl
from apps.runs.selectors import trajectory_runs


class Command(BaseCommand):
    help = "Export agent runs' trajectories as a Hugging Face datasets dataset (save_to_disk) and/or JSON lines."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("out", type=Path, help="directory for the dataset (datasets.load_from_disk reads it)")
        parser.add_argument("--owner", help="only this user's runs (username)")
        parser.add_argument("--min-reward", type=float, default=None,
                            help="only runs whose final reward is at least this (e.g. 2: beat eager)")
        parser.add_argument("--status", action="append", default=None,
                            help="only runs whose agent ended so: submitted, stopped, failed, cancelled (repeatable)")
        parser.add_argument("--jsonl", type=Path, default=None, help="also write the records as JSON lines here")

    def handle(self, *args: Any, **options: Any) -> None:
        runs = trajectory_runs(owner=options["owner"] or "", min_reward=options["min_reward"], statuses=options["status"])
        records = [{**record, "run": pk} for pk, record in runs.values_list("pk", "trajectory")]
        if not records:
            raise CommandError("no agent run matches: nothing to export (runs get a trajectory when they end)")
        out: Path = options["out"]
        if out.exists() and any(out.iterdir()):
            raise CommandError(f"{out} exists and is not empty; choose a new directory")
        dataset = save([{k: v for k, v in r.items() if k != "run"} for r in records], out)
        if options["jsonl"]:
            write_jsonl(records, options["jsonl"])
        numbers = ", ".join(f"#{r['run']}" for r in records[:20]) + (" ..." if len(records) > 20 else "")
        self.stdout.write(f"exported {dataset.num_rows} runs ({numbers}) to {out}")
