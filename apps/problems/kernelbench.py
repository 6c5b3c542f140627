"""Problems from a KernelBench checkout the user already has (never downloaded here): its
KernelBench/level{N}/*.py files are already in our problem format."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth.models import AbstractBaseUser

from apps.problems.models import Origin, Problem
from apps.problems.services import UploadRejected, create_problem, sha256


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


def import_levels(owner: AbstractBaseUser, root: Path, level: int | None = None, shared: bool = False,
                  limit: int | None = None) -> Imported:
    done = Imported()
    files = [f for d in level_dirs(root, level) for f in sorted(d.glob("*.py"), key=_numbered)]
    for path in files[:limit]:
        name = f"{path.parent.name}/{path.name}"
        try:
            source = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError) as exc:
            done.skipped.append((name, f"unreadable: {exc}"))
            continue
        if Problem.objects.filter(owner=owner, source_hash=sha256(source)).exists():
            done.existing.append(name)
            continue
        try:
            create_problem(owner, name, source, shared=shared, origin=Origin.KERNELBENCH)
        except UploadRejected as exc:
            detail = "; ".join(f"line {i.line}: {i.message}" for i in exc.issues) or exc.message
            done.skipped.append((name, detail.splitlines()[0][:300]))
        else:
            done.created.append(name)
    return done


def _numbered(path: Path) -> tuple[int, str]:
    """KernelBench names files "12_Matmul_with_diagonal.py": sort by the number, not as text."""
    head = path.name.split("_", 1)[0]
    return (int(head) if head.isdigit() else 1 << 30, path.name)
