"""Problems from a KernelBench checkout the user already has (never downloaded here): its
KernelBench/level{N}/*.py files are already in our problem format."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser

from apps.problems.models import Origin, Problem
from apps.core.errors import Refused
from apps.problems.services import create_problem, sha256


@dataclass
class Imported:
    created: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)  # the user already had this exact source
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (file, why)


def level_dirs(root: Path, level: int | None = None) -> list[Path]:
    """The level folders under a checkout (root/KernelBench/levelN) or under its KernelBench folder."""
    for base in (root / "KernelBench", root):
        levels = sorted(p for p in base.glob("level*") if p.is_dir() and p.name[5:].isdigit())
        if levels:
            picked = [p for p in levels if level is None or p.name == f"level{level}"]
            if not picked:
                raise ValueError(f"{base} has no level{level} folder (it has {', '.join(p.name for p in levels)}).")
            return picked
    raise ValueError(f"{root} is not a KernelBench checkout: no KernelBench/level1 (or level1) folder in it.")


def kernelbench_files(root: Path, level: int | None = None, limit: int | None = None) -> list[Path]:
    """The problem files of a checkout, level by level, in KernelBench's numbering."""
    return [f for d in level_dirs(root, level) for f in sorted(d.glob("*.py"), key=_numbered)][:limit]


def import_levels(owner: AbstractBaseUser, root: Path, level: int | None = None, shared: bool = False,
                  limit: int | None = None, *, in_process: bool = False,
                  progress: Callable[[str, str, str], None] | None = None) -> Imported:
    """Import each file like an upload. `progress(name, outcome, why)` hears of each file as it is done
    (outcome: created, existing or skipped); `in_process` as in services.check_in_sandbox."""
    done = Imported()
    for path in kernelbench_files(root, level, limit):
        name = f"{path.parent.name}/{path.name}"
        outcome, why = _import_one(owner, path, name, shared, in_process)
        if outcome == "created":
            done.created.append(name)
        elif outcome == "existing":
            done.existing.append(name)
        else:
            done.skipped.append((name, why))
        if progress is not None:
            progress(name, outcome, why)
    return done


def _import_one(owner: AbstractBaseUser, path: Path, name: str, shared: bool, in_process: bool) -> tuple[str, str]:
    try:
        source = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError) as exc:
        return "skipped", f"unreadable: {exc}"
    if Problem.objects.filter(owner=owner, source_hash=sha256(source)).exists():
        return "existing", ""
    try:
        create_problem(owner, name, source, shared=shared, origin=Origin.KERNELBENCH, in_process=in_process)
    except Refused as exc:
        detail = "; ".join(f"line {i.line}: {i.message}" for i in exc.issues) or exc.message
        return "skipped", detail.splitlines()[0][:300]
    return "created", ""


def _numbered(path: Path) -> tuple[int, str]:
    """KernelBench names files "12_Matmul_with_diagonal.py": sort by the number, not as text."""
    head = path.name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, path.name)
