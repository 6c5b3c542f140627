"""A training run's DATA_DIR, from the database (trainer/data.py reads it): the agent runs' trajectories as a
`datasets` dataset (agent.export.dataset, as `manage.py export_trajectories` writes them) and the problems as
problems.jsonl, each narrowed by the run's data filters."""
from __future__ import annotations

import dataclasses
import datetime
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db.models import QuerySet

from agent.engine import validation
from apps.problems.models import Origin, Problem
from apps.runs import selectors
from apps.runs.models import Run

# What each stage trains on (trainer/pipeline.py checks the same before training; here the admin hears it first).
NEEDS_PROBLEMS = {"grpo_single"}
NEEDS_TRAJECTORIES = {"rft", "critic"}
NEEDS_EITHER = {"grpo_multi"}  # problems, else the trajectories' problems


class TrainingDataError(ValueError):
    """The filters leave a stage without data; the message says which stage and what to change."""


@dataclass
class DataFilters:
    only_accepted: bool = field(default=False, metadata={
        "help": "Export only trajectories whose run ended with a kernel the library kept (accepted and faster than the "
                "best PyTorch baseline by KSTUDIO_LIBRARY_MIN_SPEEDUP)."})
    min_reward: float | None = field(default=None, metadata={
        "help": "Export only trajectories whose final reward is at least this (2: beat eager); empty: any."})
    since: str | None = field(default=None, metadata={
        "help": "Export only agent runs created on or after this date (YYYY-MM-DD); empty: all."})
    problem_origin: str = field(default="", metadata={
        "help": "Problems for the GRPO stages from one origin (uploaded, kernelbench, synthetic); empty: all."})
    problem_name_contains: str = field(default="", metadata={
        "help": "Problems whose name contains this text (case-insensitive); empty: all."})
    max_problems: int = field(default=500, metadata={"help": "At most this many problems, newest first."})

    def __post_init__(self) -> None:
        if self.problem_origin and self.problem_origin not in Origin.values:
            raise ValueError(f"problem_origin must be one of {', '.join(Origin.values)} or empty, not {self.problem_origin!r}")
        if self.since:
            try:
                datetime.date.fromisoformat(self.since)
            except ValueError:
                raise ValueError(f"since must be a date such as 2026-01-31, not {self.since!r}") from None
        if self.max_problems < 1:
            raise ValueError("max_problems must be at least 1")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def trajectory_runs(filters: DataFilters) -> QuerySet[Run]:
    """The agent runs whose stored trajectory the filters keep, oldest first (apps/runs/selectors.py's one rule)."""
    return selectors.trajectory_runs(since=datetime.date.fromisoformat(filters.since) if filters.since else None,
                                     only_accepted=filters.only_accepted, min_reward=filters.min_reward)


def trajectory_records(filters: DataFilters) -> list[dict[str, Any]]:
    return list(trajectory_runs(filters).values_list("trajectory", flat=True))


def problem_rows(filters: DataFilters, device: str) -> list[dict[str, str]]:
    """The problems the filters keep, as problems.jsonl rows. Only problems that passed their checks and use
    KernelBench's names (the trainer's prompts and the evaluation engine speak them)."""
    problems = Problem.objects.filter(runtime_error="", model_name="Model", get_inputs_name="get_inputs",
                                      get_init_inputs_name="get_init_inputs").order_by("-created_at")
    if filters.problem_origin:
        problems = problems.filter(origin=filters.problem_origin)
    if filters.problem_name_contains:
        problems = problems.filter(name__icontains=filters.problem_name_contains)
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    for name, source, source_hash in problems.values_list("name", "source", "source_hash").iterator():
        if source_hash in seen or not validation.validate_problem(source).ok:
            continue
        seen.add(source_hash)
        rows.append({"name": name, "source": source, "device": device})
        if len(rows) >= filters.max_problems:
            break
    return rows


def missing_data(stages: list[str], problems: int, trajectories: int) -> str:
    """Why these stages cannot train on that many problems and trajectories, or "" when they can."""
    if NEEDS_PROBLEMS & set(stages) and not problems:
        return ("Stage grpo_single trains on problems, and no problem matches the problem filters: upload or "
                "import problems, or widen the filters (origin, name).")
    if NEEDS_TRAJECTORIES & set(stages) and not trajectories:
        wanted = [s for s in stages if s in NEEDS_TRAJECTORIES]
        subject = f"Stages {' and '.join(wanted)} train" if len(wanted) > 1 else f"Stage {wanted[0]} trains"
        return (f"{subject} on agent runs' trajectories, and no finished agent run matches the "
                f"trajectory filters: run the agent on some problems first, or widen the filters (accepted only, "
                f"minimum reward, since).")
    if NEEDS_EITHER & set(stages) and not (problems or trajectories):
        return "Stage grpo_multi needs problems or trajectories, and the filters match neither; widen them."
    return ""


def write(filters: DataFilters, stages: list[str], device: str, data_dir: Path) -> dict[str, int]:
    """Write DATA_DIR: trajectories/ and problems.jsonl, each only when something matches. Returns the counts;
    raises TrainingDataError when a stage would be left without data."""
    # `datasets` (pyarrow) takes seconds to import: only the train worker that writes DATA_DIR loads it, never the
    # web process that counts the data for the launch form.
    from agent.export import save

    records = trajectory_records(filters)
    problems = problem_rows(filters, device)
    error = missing_data(stages, len(problems), len(records))
    if error:
        raise TrainingDataError(error)
    data_dir.mkdir(parents=True, exist_ok=True)
    if records:
        save(records, data_dir / "trajectories")
    if problems:
        (data_dir / "problems.jsonl").write_text("".join(json.dumps(row) + "\n" for row in problems), encoding="utf-8")
    return {"trajectories": len(records), "problems": len(problems)}
