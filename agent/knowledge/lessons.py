"""What a finished run teaches: a few knowledge-base entries, best first, each a plain dict with the keys of
ENTRY_KEYS (title, body, status, speedups, backend, device, signature, profile, turn), including what made things
slower. The studio stores them (apps/knowledge) and hands them back as dicts.

    entries = distill(state)
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any


from agent.knowledge.library import DEFAULT_MIN_SPEEDUP, SLOWER, judge_summary
from agent.engine.validation import validate_candidate
from agent.engine.verdict import Status
from agent.knowledge.signature import Signature, clip, problem_signature

if TYPE_CHECKING:
    from agent.loop.state import AgentState

ENTRY_KEYS = ("title", "body", "status", "speedup_vs_eager", "speedup_vs_compile", "backend", "device", "signature",
              "profile", "turn")

# A run yields a handful of entries: the knowledge base should hold lessons, not trajectories.
MAX_ENTRIES_PER_RUN = 5
MAX_ACCEPTED_FIRST = 3
TITLE_CHARS = 160
BODY_CHARS = 1500
NOTE_CHARS = 400
MESSAGE_CHARS = 300


_EVALUATING_TOOLS = frozenset({"write_candidate", "benchmark", "profile"})
_DEVICE_WORDS = {"cpu": "CPU", "cuda": "GPU"}

# Keywords in a candidate's source and the technique they reveal, in the words an engineer would search for.
_TECHNIQUES = (
    ("__shared__", "shared memory"), ("extern __shared__", "dynamic shared memory"),
    ("float4", "float4 vector loads"), ("half2", "half2 vector math"), ("__shfl", "warp shuffles"),
    ("wmma", "WMMA tensor cores"), ("mma.sync", "mma.sync tensor cores"), ("cp.async", "cp.async copies"),
    ("__ldg", "read-only cache loads"), ("__launch_bounds__", "launch bounds"), ("#pragma unroll", "loop unrolling"),
    ("atomicAdd", "atomics"), ("__expf", "fast-math intrinsics"), ("use_fast_math", "fast math"),
    ("cublas", "cuBLAS"), ("tl.dot", "tl.dot"), ("triton.autotune", "Triton autotune"),
    ("tl.atomic", "Triton atomics"), ("#pragma omp simd", "OpenMP SIMD"), ("#pragma omp", "OpenMP threads"),
    ("_mm256", "AVX intrinsics"), ("_mm512", "AVX-512 intrinsics"), ("__restrict__", "restrict pointers"))
_KERNEL_NAMES = (re.compile(r"__global__\s+(?:__launch_bounds__\([^)]*\)\s+)?void\s+(\w+)"),
                 re.compile(r"@triton\.(?:jit|autotune)[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+(\w+)"))
_FUNCTIONS_ARG = re.compile(r"functions\s*=\s*\[([^\]]*)\]")


@dataclass
class _Evaluation:
    turn: int
    source: str
    summary: dict[str, Any]
    note: str
    """The assistant's own text in the turn that asked for this evaluation."""
    profile_text: str
    """The profile part of the observation, for a profile call."""


def distill(state: AgentState, min_speedup: float = DEFAULT_MIN_SPEEDUP, keep_noisy: bool = False) -> list[dict[str, Any]]:
    """The entries worth keeping from a finished run, best first: each candidate the library would keep (fastest
    first) and one per failure class (build error, incorrect, correct but slower than PyTorch, ...), at most
    MAX_ENTRIES_PER_RUN. Only what agent.knowledge.library keeps at `min_speedup` is labelled "accepted"."""
    signature = problem_signature(state.problem_source)
    by_source: dict[str, list[_Evaluation]] = {}
    for evaluation in _evaluations(state):
        by_source.setdefault(evaluation.source, []).append(evaluation)
    accepted: list[tuple[_Evaluation, list[_Evaluation]]] = []
    failures: dict[str, tuple[_Evaluation, list[_Evaluation]]] = {}
    for evaluations in by_source.values():
        passed = [e for e in evaluations if e.summary["status"] == Status.ACCEPTED.value]
        if passed and judge_summary(passed[-1].summary, min_speedup, keep_noisy).keep:
            accepted.append((passed[-1], evaluations))  # the newest figures stand, as in the loop
        elif passed:
            failures[SLOWER] = (passed[-1], evaluations)
        elif evaluations[-1].summary["status"] != Status.CAPACITY.value:  # the engine's limit teaches nothing of kernels
            failures[evaluations[-1].summary["status"]] = (evaluations[-1], evaluations)  # the latest of a class
    accepted.sort(key=lambda pair: pair[0].summary.get("speedup_vs_eager") or 0.0, reverse=True)
    chosen = accepted[:MAX_ACCEPTED_FIRST] + list(failures.values()) + accepted[MAX_ACCEPTED_FIRST:]
    best_source = state.best["source"] if state.best else None
    best_profile = (state.best.get("verdict") or {}).get("profile") if state.best else None
    return [_entry(state, signature, outcome, evaluations,
                   best_profile if outcome.source == best_source else None, min_speedup, keep_noisy)
            for outcome, evaluations in chosen[:MAX_ENTRIES_PER_RUN]]


def _evaluations(state: AgentState) -> list[_Evaluation]:
    """Every evaluation of the run with the candidate source it judged. Sources come from write_candidate's
    arguments; benchmark and profile re-judge the best or latest one, tracked here as the loop tracks them."""
    observations = {m.get("tool_call_id"): m.get("content") or "" for m in state.messages if m.get("role") == "tool"}
    assistant = [m for m in state.messages if m.get("role") == "assistant"]
    evaluations: list[_Evaluation] = []
    latest: str | None = None
    best: tuple[str, float] | None = None
    # The loop appends one assistant message and one TurnRecord per step, in the same order.
    for record, message in zip(state.turns, assistant):
        summaries = iter(record.verdicts)
        for call in message.get("tool_calls") or []:
            name = call.get("function", {}).get("name")
            observation = observations.get(call.get("id"), "")
            if name not in _EVALUATING_TOOLS or observation.startswith(("error:", "not run:")):
                continue  # refused or never run: no verdict was recorded for it
            summary = next(summaries, None)
            if summary is None:
                break
            arguments = _json_object(call.get("function", {}).get("arguments", ""))
            if name == "write_candidate":
                source = arguments.get("source")
            elif arguments.get("candidate", "best") == "best" and best is not None:
                source = best[0]
            else:
                source = latest
            if not isinstance(source, str):
                continue
            latest = source
            speed = summary.get("speedup_vs_eager") or 0.0
            if summary["status"] == Status.ACCEPTED.value and (best is None or best[0] == source or speed > best[1]):
                best = (source, speed)
            profile = observation[observation.find("\nprofile ("):].strip() if "\nprofile (" in observation else ""
            evaluations.append(_Evaluation(record.turn, source, summary, message.get("content") or "", profile))
    return evaluations


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def _entry(state: AgentState, signature: Signature, outcome: _Evaluation, evaluations: list[_Evaluation],
           verdict_profile: dict[str, Any] | None, min_speedup: float, keep_noisy: bool) -> dict[str, Any]:
    summary = outcome.summary
    decision = judge_summary(summary, min_speedup, keep_noisy)
    # A correct kernel the library would not keep is a lesson ("this was slower"), never an "accepted" success.
    status = summary["status"] if summary["status"] != Status.ACCEPTED.value or decision.keep else SLOWER
    backend = validate_candidate(outcome.source).backend_hint or ""
    kernels = _kernel_names(outcome.source)
    techniques = [label for keyword, label in _TECHNIQUES if keyword in outcome.source]
    profile = _profile(verdict_profile) if verdict_profile else None
    profile_text = next((e.profile_text for e in reversed(evaluations) if e.profile_text), "")
    if profile is None and profile_text:
        profile = {"text": clip(profile_text, 800)}
    effect = speedups(summary) if summary["status"] == Status.ACCEPTED.value else _first_line(summary["message"])
    ops = " ".join(signature.ops[:5]) or "unknown ops"
    title = f"{ops}, {backend or 'unknown'} kernel on {_DEVICE_WORDS.get(state.device, state.device)}: {status}, {effect}"
    lines = [f"Tried: a {backend or 'kernel'} candidate (turn {outcome.turn})"
             + (f"; kernels {', '.join(kernels)}" if kernels else "")
             + (f"; techniques: {', '.join(techniques)}" if techniques else "") + "."]
    # The model explains its approach in the turn that wrote the candidate; later turns only re-measure it.
    note = " ".join(next((e.note for e in evaluations if e.note.strip()), "").split())
    if note:
        lines.append("Reasoning: " + clip(note, NOTE_CHARS))
    result = f"Result: {status}; {speedups(summary)}"
    if status == SLOWER:
        result += f"; not kept: {decision.reason}"
    if summary.get("flags"):
        result += f"; flags: {', '.join(summary['flags'])}"
    if summary["status"] != Status.ACCEPTED.value and summary.get("message"):
        result += "; message: " + clip(" ".join(summary["message"].split()), MESSAGE_CHARS)
    lines.append(result + ".")
    if len(evaluations) > 1:
        lines.append(f"Evaluated {len(evaluations)} times: " + ", ".join(e.summary["status"] for e in evaluations) + ".")
    if profile:
        lines.append("Profile: " + profile_line(profile))
    return {"title": clip(title, TITLE_CHARS), "body": clip("\n".join(lines), BODY_CHARS),
            "status": status, "speedup_vs_eager": summary.get("speedup_vs_eager"),
            "speedup_vs_compile": summary.get("speedup_vs_compile"), "backend": backend, "device": state.device,
            "signature": signature.to_dict(), "profile": profile, "turn": outcome.turn}


def _kernel_names(source: str) -> list[str]:
    names = [m.group(1) for pattern in _KERNEL_NAMES for m in pattern.finditer(source)]
    for match in _FUNCTIONS_ARG.finditer(source):
        names += re.findall(r"['\"](\w+)['\"]", match.group(1))
    return list(dict.fromkeys(names))[:6]


def _profile(profile: dict[str, Any]) -> dict[str, Any]:
    """The top kernels of a verdict's profile, small enough to keep per entry."""
    return {"tool": profile.get("tool"), "total_us": profile.get("total_us"),
            "kernels": [dict(k) for k in (profile.get("kernels") or [])[:5] if isinstance(k, dict)]}


def profile_line(profile: Mapping[str, Any]) -> str:
    if profile.get("text"):
        return str(profile["text"])
    parts = []
    for kernel in profile.get("kernels") or []:
        figures = ", ".join(f"{key} {kernel[key]}" for key in ("pct", "avg_us", "duration_us", "dram_pct", "sm_pct",
                                                               "occupancy_pct") if kernel.get(key) is not None)
        parts.append(f"{str(kernel.get('name', '?'))[:80]} ({figures})")
    return f"top kernels ({profile.get('tool') or 'profiler'}): " + "; ".join(parts) if parts else "no kernels recorded"


def speedups(summary: Mapping[str, Any]) -> str:
    eager, compiled = summary.get("speedup_vs_eager"), summary.get("speedup_vs_compile")
    if eager is None:
        return "not timed"
    return f"{eager:.2f}x vs eager" + (f", {compiled:.2f}x vs torch.compile" if compiled is not None else "")


def _first_line(text: str) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "no message")
