"""The kernel library: keeping an accepted candidate with its provenance, and handing it out."""
from __future__ import annotations

import re

from django.utils import timezone

from apps.kernels.models import Kernel
from apps.runs.models import Candidate

# A hand-written kernel submitted by its user; agent policies will name themselves here.
USER_POLICY = "user"


def keep_accepted(candidate: Candidate) -> Kernel:
    """Store an accepted candidate as a Kernel (once: a repeated step finds the one it made)."""
    existing = Kernel.objects.filter(candidate=candidate).first()
    if existing is not None:
        return existing
    verdict = candidate.verdict or {}
    if verdict.get("status") != "accepted":
        raise ValueError(f"candidate {candidate.pk} was not accepted ({verdict.get('status')}); only accepted ones become kernels")
    run = candidate.run
    problem = run.problem
    timing = verdict.get("timing") or {}
    return Kernel.objects.create(
        candidate=candidate, problem=problem, owner=run.owner, name=f"{problem.name} ({candidate.backend or 'kernel'})",
        source=candidate.source, source_hash=candidate.source_hash, problem_hash=problem.source_hash,
        backend=candidate.backend or (verdict.get("build") or {}).get("backend", ""), device=verdict.get("device", ""),
        produced_by=run.owner, policy=run.config.get("policy", USER_POLICY), model_name=run.config.get("model", ""),
        trajectory=[e.to_message() for e in run.events.order_by("seq")],
        toolchain=verdict.get("toolchain", {}), hardware=verdict.get("hardware", {}),
        verification={k: verdict.get(k) for k in ("status", "stage", "correct", "trials", "flags", "weights", "message",
                                                  "version", "seconds", "build")},
        timing=timing, speedup_vs_eager=timing.get("speedup_vs_eager"), speedup_vs_compile=timing.get("speedup_vs_compile"),
        shared=run.shared, verified_at=timezone.now())


def download_name(kernel: Kernel) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", kernel.problem.name.removesuffix(".py")).strip("_") or "kernel"
    return f"{stem}_kernel_{kernel.pk}.py"


def render_module(kernel: Kernel) -> str:
    """The kernel as one self-contained module: the verified source verbatim, under a provenance header
    (comments only, so the code and its hash are exactly what was verified)."""
    t = kernel.timing or {}
    lines = [
        f"# Kernel Studio kernel {kernel.pk}: {kernel.name}",
        f"# Solves problem '{kernel.problem.name}' (sha256 {kernel.problem_hash}).",
        f"# Source sha256 {kernel.source_hash}; backend {kernel.backend}; device {kernel.device}.",
        f"# Produced by {kernel.produced_by or 'a deleted user'} with policy '{kernel.policy}'"
        + (f", model '{kernel.model_name}'" if kernel.model_name else "") + f"; verified {kernel.verified_at:%Y-%m-%d %H:%M} UTC.",
    ]
    if t:
        lines.append(f"# Timing: {t.get('candidate_ms', 0):.4f} ms vs eager {t.get('eager_ms', 0):.4f} ms "
                     f"({t.get('speedup_vs_eager', 0):.2f}x), clock {t.get('clock', '?')}.")
    lines.append("# Use: from this module import ModelNew; it takes the same arguments as the problem's Model.")
    return "\n".join(lines) + "\n\n" + kernel.source.rstrip("\n") + "\n"
