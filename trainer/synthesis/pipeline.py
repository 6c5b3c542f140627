"""The synthesis loop: compose a chain, render it, and keep it only if it passes every filter, cheapest
first: the static check (agent.engine.validation), near-duplicates (no process needed), then the worker's
checks (eager, finite, non-constant, deterministic, runtime window, torch.compile last)."""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from agent.engine import validate_problem
from trainer.synthesis.catalogue import SIZES
from trainer.synthesis.checks import REASONS
from trainer.synthesis.compose import problem_name, random_chain, render
from trainer.synthesis.config import SynthesisConfig
from trainer.synthesis.dedup import DuplicateIndex
from trainer.synthesis.worker import CheckWorker


@dataclass
class SynthesizedProblem:
    name: str
    source: str
    device: str
    ops: list[str]
    checks: dict[str, Any]  # what the worker measured: eager_ms, compile_ms, output_shape
    origin: str = "synthetic"

    def to_record(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "device": self.device, "ops": self.ops,
                "origin": self.origin, "checks": self.checks}


@dataclass
class Report:
    kept: int = 0
    attempts: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    first_detail: dict[str, str] = field(default_factory=dict)  # one example per reason, for the reader
    seconds: float = 0.0
    worker_restarts: int = 0
    config: dict[str, Any] = field(default_factory=dict)

    def reject(self, reason: str, detail: str) -> None:
        self.rejected[reason] += 1
        self.first_detail.setdefault(reason, detail[:500])

    def to_dict(self) -> dict[str, Any]:
        return {"kept": self.kept, "attempts": self.attempts, "rejected": self.rejected,
                "rejected_total": sum(self.rejected.values()), "first_detail": self.first_detail,
                "seconds": round(self.seconds, 1), "worker_restarts": self.worker_restarts, "config": self.config}

    def text(self) -> str:
        lines = [f"kept {self.kept} of {self.attempts} candidates in {self.seconds:.0f} s "
                 f"(worker restarts: {self.worker_restarts})", "rejected:"]
        lines += [f"  {reason:<17} {n}" for reason, n in self.rejected.items()]
        return "\n".join(lines)


@dataclass
class Synthesis:
    problems: list[SynthesizedProblem]
    report: Report


def synthesize(config: SynthesisConfig, existing: Iterable[tuple[str, str]] = (),
               progress: Callable[[str], None] | None = None) -> Synthesis:
    """Compose candidates until `config.count` are kept or `config.max_attempts` were tried.
    `existing` are (name, source) pairs a new problem must not nearly duplicate."""
    started = time.monotonic()
    rng = random.Random(config.seed)
    sizes = SIZES[config.device]
    index = DuplicateIndex(config.similarity)
    for name, source in existing:
        index.add(name, source)
    report = Report(config=dict(config.__dict__))
    kept: list[SynthesizedProblem] = []
    say = progress or (lambda line: None)
    assert config.max_attempts is not None  # filled in by SynthesisConfig.__post_init__
    with CheckWorker(config.check_settings(), config.timeout_s, config.threads) as worker:
        while len(kept) < config.count and report.attempts < config.max_attempts:
            report.attempts += 1
            chain = random_chain(rng, sizes, config.min_ops, config.max_ops, config.dtype)
            if chain is None:
                report.reject("invalid_source", "no chain of min_ops ops could be composed from the drawn input")
                continue
            source = render(chain)
            label = f"[{report.attempts}] {' > '.join(chain.ops)}"
            static = validate_problem(source, filename="synthesized.py")
            if not static.ok:
                report.reject("invalid_source", "; ".join(i.message for i in static.errors()))
                say(f"{label}: invalid_source")
                continue
            duplicate = index.match(source)
            if duplicate is not None:
                report.reject("near_duplicate", duplicate)
                say(f"{label}: near_duplicate ({duplicate})")
                continue
            outcome = worker.check(source)
            if not outcome.ok:
                assert outcome.reason is not None
                report.reject(outcome.reason, f"{' > '.join(chain.ops)}: {outcome.detail}")
                say(f"{label}: {outcome.reason} ({outcome.detail.splitlines()[0][:160] if outcome.detail else ''})")
                continue
            name = problem_name(chain, source)
            index.add(name, source)
            checks = {"eager_ms": outcome.eager_ms, "compile_ms": outcome.compile_ms, "output_shape": outcome.output_shape}
            kept.append(SynthesizedProblem(name, source, config.device, chain.ops, checks))
            say(f"{label}: kept as {name} ({len(kept)}/{config.count}, eager {outcome.eager_ms:.3f} ms)")
        report.worker_restarts = worker.restarts
    report.kept = len(kept)
    report.seconds = time.monotonic() - started
    return Synthesis(kept, report)
