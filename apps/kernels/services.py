"""The kernel library: keeping an accepted candidate with its provenance, and handing it out."""
from __future__ import annotations

import re
from collections.abc import Iterable

from django.utils import timezone

from agent.packaging import KernelFacts, package_zip, standalone_module, zip_name
from agent.roofline import hardware_name
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


def facts_of(kernel: Kernel, studio_url: str = "") -> KernelFacts:
    """What the export says about a kernel: its sources and the evidence from its stored verdict."""
    problem = kernel.problem
    run_facts = (problem.validation or {}).get("run") or {}
    return KernelFacts(
        kernel_id=kernel.pk, name=kernel.name, problem_name=problem.name, problem_source=problem.source,
        kernel_source=kernel.source, model_name=problem.model_name, get_inputs_name=problem.get_inputs_name,
        get_init_inputs_name=problem.get_init_inputs_name, returns_sequence=bool(run_facts.get("returns_sequence")),
        backend=kernel.backend, device=kernel.device, produced_by=str(kernel.produced_by or ""), policy=kernel.policy,
        model=kernel.model_name, verified_at=f"{kernel.verified_at:%Y-%m-%d %H:%M} UTC",
        verification={k: (kernel.verification or {}).get(k) for k in ("status", "stage", "trials", "flags", "weights")},
        timing=kernel.timing or {}, toolchain=kernel.toolchain or {}, hardware=kernel.hardware or {}, studio_url=studio_url)


def download_name(kernel: Kernel) -> str:
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", kernel.problem.name.removesuffix(".py")).strip("_") or "kernel"
    return f"{stem}_kernel_{kernel.pk}.py"


def render_module(kernel: Kernel) -> str:
    """The kernel as one self-contained module: the verified source verbatim between a provenance header
    and a `load()` (comments and additions only, so the code and its hash are exactly what was verified)."""
    return standalone_module(facts_of(kernel))


def render_package(kernel: Kernel, studio_url: str = "") -> tuple[str, bytes]:
    """(file name, zip bytes) of the pip-installable package registering the kernel as a custom op."""
    facts = facts_of(kernel, studio_url)
    return zip_name(facts), package_zip(facts)


def hardware_label(kernel: Kernel) -> str:
    return hardware_name(kernel.hardware or {}) if kernel.hardware else (kernel.device or "unknown")


def leaderboard(kernels: Iterable[Kernel]) -> list[tuple[str, list[Kernel]]]:
    """Kernels grouped by the hardware they were timed on, fastest first (by measured time; speedups
    are only comparable on one machine)."""
    groups: dict[str, list[Kernel]] = {}
    for kernel in kernels:
        groups.setdefault(hardware_label(kernel), []).append(kernel)
    return sorted(((hw, sorted(ks, key=_speed)) for hw, ks in groups.items()), key=lambda g: g[0])


def _speed(kernel: Kernel) -> tuple[float, float]:
    """Sort key: measured median time, then the speedup; an untimed kernel ranks last."""
    ms = (kernel.timing or {}).get("candidate_ms")
    return (ms if isinstance(ms, (int, float)) else float("inf"), -(kernel.speedup_vs_eager or 0.0))
