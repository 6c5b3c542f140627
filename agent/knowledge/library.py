"""What is worth keeping: the rule that decides whether a verified candidate enters the kernel library,
the knowledge base as a success and the training data as one. Plain Python; the studio passes its margin.

    speedup = best_of_speedup(eager, compiled)            # vs the faster PyTorch baseline
    decision = judge_verdict(verdict_dict, min_speedup)    # or judge_summary(loop summary, min_speedup)
    decision.keep, decision.reason

A kernel is kept only when it is accepted (correct, no rejecting flag), its timing was steady (no
noisy_timing) and it beats the faster of eager and torch.compile by the margin: a correct kernel that is
slower than PyTorch is a lesson, not a library entry.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.engine.verdict import Flag, Status

# The studio's default margin (KSTUDIO_LIBRARY_MIN_SPEEDUP): 5% beats the run-to-run noise of a quiet machine.
DEFAULT_MIN_SPEEDUP = 1.05
# The label a correct but too slow candidate carries where "accepted" would overstate it (knowledge entries).
SLOWER = "slower_than_pytorch"


@dataclass(frozen=True)
class Decision:
    keep: bool
    reason: str
    """Why it is kept or not, in words for the user ("0.50x the faster PyTorch baseline, below the 1.05x ...")."""
    speedup: float | None
    """The best-of speedup (None when untimed)."""


def best_of_speedup(speedup_vs_eager: float | None, speedup_vs_compile: float | None) -> float | None:
    """The speedup over the faster of eager and torch.compile: the faster baseline gives the smaller ratio.
    Eager alone when torch.compile was not timed; None when nothing was."""
    if speedup_vs_eager is None:
        return None
    if speedup_vs_compile is None:
        return float(speedup_vs_eager)
    return float(min(speedup_vs_eager, speedup_vs_compile))


def judge(status: str, speedup_vs_eager: float | None, speedup_vs_compile: float | None, flags: list[str],
          min_speedup: float, keep_noisy: bool = False) -> Decision:
    speedup = best_of_speedup(speedup_vs_eager, speedup_vs_compile)
    baseline = "torch.compile" if speedup_vs_compile is not None and speedup_vs_compile < (speedup_vs_eager or 0) else "eager"
    if status != Status.ACCEPTED.value:
        return Decision(False, f"not accepted ({status})", speedup)
    if speedup is None:
        return Decision(False, "accepted but never timed, so there is no speedup to keep it for", None)
    if Flag.CONSTANT_REFERENCE.value in flags:
        return Decision(False, "the reference's output is one constant whatever its inputs, so the verdict proves "
                               "nothing about the kernel", speedup)
    if Flag.NOISY_TIMING.value in flags and not keep_noisy:
        return Decision(False, f"its timing was noisy ({speedup:.2f}x is not trustworthy); re-benchmark it on a quiet "
                               "machine", speedup)
    if speedup < min_speedup:
        return Decision(False, f"correct but {speedup:.2f}x the faster PyTorch baseline ({baseline}); the library keeps "
                               f"kernels at least {min_speedup:.2f}x faster", speedup)
    return Decision(True, f"{speedup:.2f}x the faster PyTorch baseline ({baseline})", speedup)


def judge_verdict(verdict: Mapping[str, Any], min_speedup: float, keep_noisy: bool = False) -> Decision:
    """For a stored verdict (agent.engine.verdict.Verdict.to_dict())."""
    timing = verdict.get("timing") or {}
    flags = [f.get("flag", "") if isinstance(f, Mapping) else str(f) for f in verdict.get("flags") or []]
    return judge(str(verdict.get("status")), timing.get("speedup_vs_eager"), timing.get("speedup_vs_compile"), flags,
                 min_speedup, keep_noisy)


def judge_summary(summary: Mapping[str, Any], min_speedup: float, keep_noisy: bool = False) -> Decision:
    """For the loop's verdict summary (speedups at the top, flags by name)."""
    return judge(str(summary.get("status")), summary.get("speedup_vs_eager"), summary.get("speedup_vs_compile"),
                 [str(f) for f in summary.get("flags") or []], min_speedup, keep_noisy)
