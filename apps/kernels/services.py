"""The kernel library: keeping an accepted candidate with its provenance, and handing it out."""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.utils import timezone

from agent.knowledge import best_of_speedup, judge_verdict
from agent.export import KernelFacts, package_zip, standalone_module, zip_name
from agent.engine import hardware_name
from apps.kernels.models import Kernel
from apps.runs.models import Candidate
from apps.runs.stored_verdict import StoredVerdict

# A hand-written kernel submitted by its user; agent policies will name themselves here.
USER_POLICY = "user"


@dataclass(frozen=True)
class Offer:
    """What the library did with a run's best candidate: the kernel it holds now (None when not kept), whether the
    source was there already, and why."""

    kernel: Kernel | None
    duplicate: bool
    reason: str


def offer(candidate: Candidate) -> Offer:
    """Keep a candidate only if it is worth keeping (agent.knowledge.library: accepted, steady timing, faster than the best
    PyTorch baseline by KSTUDIO_LIBRARY_MIN_SPEEDUP); the same source on the same hardware is kept once."""
    decision = judge_verdict(candidate.verdict or {}, settings.KSTUDIO_LIBRARY_MIN_SPEEDUP,
                             settings.KSTUDIO_LIBRARY_KEEP_NOISY)
    if not decision.keep:
        return Offer(None, False, decision.reason)
    existing = _same_kernel(candidate)
    kernel = keep_accepted(candidate)
    return Offer(kernel, existing is not None, decision.reason)


def keep_accepted(candidate: Candidate) -> Kernel:
    """Store an accepted candidate as a Kernel (once: a repeated step finds the one it made). A source its owner
    already has in the library for this problem and hardware adds a measurement to that kernel instead."""
    existing = Kernel.objects.filter(candidate=candidate).first() or _same_kernel(candidate)
    verdict = StoredVerdict(candidate.verdict or {})
    if existing is not None:
        _add_measurement(existing, candidate, verdict.timing or {})
        return existing
    if not verdict.accepted:
        raise ValueError(f"candidate {candidate.pk} was not accepted ({verdict.status}); only accepted ones become kernels")
    run = candidate.run
    problem = run.problem
    timing = verdict.timing or {}
    return Kernel.objects.create(
        candidate=candidate, problem=problem, owner=run.owner, name=f"{problem.name} ({candidate.backend or 'kernel'})",
        source=candidate.source, source_hash=candidate.source_hash, problem_hash=problem.source_hash,
        backend=candidate.backend or verdict.backend, device=verdict.device,
        produced_by=run.owner, policy=run.config.get("policy", USER_POLICY), model_name=run.config.get("model", ""),
        trajectory=[e.to_message() for e in run.events.order_by("seq")],
        toolchain=verdict.toolchain, hardware=verdict.hardware,
        verification=verdict.part("status", "stage", "correct", "trials", "flags", "weights", "message", "version",
                                  "seconds", "build"),
        timing=timing, speedup_vs_eager=verdict.speedup_vs_eager, speedup_vs_compile=verdict.speedup_vs_compile,
        speedup_best_of=best_of_speedup(verdict.speedup_vs_eager, verdict.speedup_vs_compile),
        measurements=[_measurement(candidate, timing)] if timing else [], shared=run.shared, verified_at=timezone.now())


def _same_kernel(candidate: Candidate) -> Kernel | None:
    """The owner's kernel with this source for this problem on this hardware, if the library has it already."""
    run = candidate.run
    verdict = StoredVerdict(candidate.verdict or {})
    hardware = _label(verdict.hardware, verdict.device)
    for kernel in Kernel.objects.filter(owner=run.owner, problem_hash=run.problem.source_hash,
                                        source_hash=candidate.source_hash).order_by("pk"):
        if hardware_label(kernel) == hardware:
            return kernel
    return None


def _measurement(candidate: Candidate, timing: dict[str, Any]) -> dict[str, Any]:
    verdict = StoredVerdict(candidate.verdict or {})
    return {"candidate": candidate.pk, "run": candidate.run_id, "at": timezone.now().isoformat(), "timing": timing,
            "status": verdict.status, "flags": verdict.flag_names()}


def add_remeasurement(kernel_pk: int, candidate: Candidate) -> tuple[Kernel | None, str]:
    """A re-benchmark's verdict joins its kernel's measurements, whatever it says. Returns the kernel (None when it
    is gone or not the same kernel on the same hardware) and a sentence for the run's events."""
    kernel = Kernel.objects.filter(pk=kernel_pk).first()
    if kernel is None:
        return None, f"kernel {kernel_pk} is no longer in the library; nothing was added"
    verdict = StoredVerdict(candidate.verdict or {})
    if kernel.source_hash != candidate.source_hash or kernel.owner_id != candidate.run.owner_id:
        return None, f"this run's source is not kernel {kernel.pk}'s; nothing was added"
    if _label(verdict.hardware, verdict.device) != hardware_label(kernel):
        return None, (f"measured on {_label(verdict.hardware, verdict.device)}, not on kernel {kernel.pk}'s "
                      f"{hardware_label(kernel)}; nothing was added to it")
    _add_measurement(kernel, candidate, verdict.timing or {}, untimed=True)
    if not verdict.timing:
        return kernel, f"kernel {kernel.pk} was not timed this time ({verdict.status}); recorded in its measurements"
    return kernel, f"measurement {len(kernel.measurements)} of kernel {kernel.pk} added"


def _add_measurement(kernel: Kernel, candidate: Candidate, timing: dict[str, Any], *, untimed: bool = False) -> None:
    if (not timing and not untimed) or any(m.get("candidate") == candidate.pk for m in kernel.measurements):
        return  # untimed, or this candidate's figures are there already (a repeated step)
    kernel.measurements = [*kernel.measurements, _measurement(candidate, timing)]
    kernel.save(update_fields=["measurements"])


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
    return _label(kernel.hardware or {}, kernel.device)


def _label(hardware: dict[str, Any], device: str) -> str:
    return hardware_name(hardware) if hardware else (device or "unknown")


def leaderboard(kernels: Iterable[Kernel]) -> list[tuple[str, list[Kernel]]]:
    """Kernels grouped by the hardware they were timed on (speedups are only comparable on one machine), ranked
    by the speedup over the faster PyTorch baseline, highest first; a kernel whose timing was noisy or that was
    never timed ranks below every steady one, whatever its figure."""
    groups: dict[str, list[Kernel]] = {}
    for kernel in kernels:
        groups.setdefault(hardware_label(kernel), []).append(kernel)
    return sorted(((hw, sorted(ks, key=_rank)) for hw, ks in groups.items()), key=lambda g: g[0])


def is_noisy(kernel: Kernel) -> bool:
    return any(isinstance(f, dict) and f.get("flag") == "noisy_timing" for f in StoredVerdict(kernel.verification or {}).flags)


def _rank(kernel: Kernel) -> tuple[bool, float, int]:
    speedup = best_of_speedup(kernel.speedup_vs_eager, kernel.speedup_vs_compile)
    return (is_noisy(kernel) or speedup is None, -(speedup or 0.0), kernel.pk)
