"""Problems composed by trainer.synthesis, stored for a user and tagged `origin=synthetic`.

Their code comes from our own seed-op catalogue and every one was already imported and run (eager,
torch.compile) in the pipeline's worker process, so they skip an upload's sandbox check; the static check
(agent.engine.validation) still runs, and a problem the owner already has (same source hash) is left alone.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from agent.engine import validation
from apps.problems.models import Origin, Problem
from apps.problems.services import sha256
from trainer.synthesis.config import SynthesisConfig
from trainer.synthesis.pipeline import Report, SynthesizedProblem, synthesize

EXAMPLES = Path(settings.BASE_DIR) / "examples"


@dataclass
class Stored:
    created: list[Problem] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)  # the owner already had this exact source
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (name, why agent.engine.validation refused it)


def store_synthesized(owner: AbstractBaseUser, problems: Iterable[SynthesizedProblem], shared: bool = False) -> Stored:
    done = Stored()
    with transaction.atomic():
        for problem in problems:
            digest = sha256(problem.source)
            if Problem.objects.filter(owner=owner, source_hash=digest).exists():
                done.existing.append(problem.name)
                continue
            report = validation.validate_problem(problem.source, filename=f"{problem.name}.py")
            if not report.ok:
                done.invalid.append((problem.name, "; ".join(i.message for i in report.errors())))
                continue
            done.created.append(Problem.objects.create(
                owner=owner, name=problem.name[:200], source=problem.source, source_hash=digest, shared=shared,
                origin=Origin.SYNTHETIC,
                validation={**report.to_dict(), "synthesis": {"ops": problem.ops, "device": problem.device,
                                                              **problem.checks}}))
    return done


def synthesize_for(owner: AbstractBaseUser, config: SynthesisConfig, shared: bool = False) -> tuple[Stored, Report]:
    """Run the pipeline against what the owner can already see (and our examples), then store the result."""
    existing = [(f"problem {p.pk} ({p.name})", p.source) for p in Problem.objects.visible_to(owner).only("name", "source")]
    existing += [(str(path.relative_to(EXAMPLES.parent)), path.read_text(encoding="utf-8"))
                 for path in sorted(EXAMPLES.glob("*.py"))]
    result = synthesize(config, existing)
    return store_synthesized(owner, result.problems, shared=shared), result.report
