"""The built-in policy: a performance engineer without a language model.

Turn 1 traces the problem (in the sandbox), plans a fused kernel, and writes the first variant with
write_candidate. Each later turn reads the verdicts so far from the conversation (as a model would),
writes the next variant, and finally submits the fastest accepted one. Its text says what it found
and why it tries what it tries, and streams like a model's. A module it cannot handle ends the run
with a PolicyError naming what is unsupported: never a fake result.

The policy keeps no state between turns: everything is read off the conversation, so a resumed run
continues where it stopped.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

from agent.builtin import codegen, gcodegen
from agent.builtin.codegen import Variant
from agent.builtin.graph import GraphPlan, describe_graph, plan_graph
from agent.builtin.lower import Plan, Unsupported, describe, lower
from agent.builtin.rewrite import rewritten
from agent.engine.evaluate import ProblemError
from agent.loop.policies.base import PolicyError, PolicyTurn, ToolCall

Tracer = Callable[[str], dict[str, Any]]


@dataclass
class RewrittenPlan:
    """A whole-graph plan of the module after exact algebraic rewrites (rewrite.py), tried first, and the plan of the
    module as written, whose variants are measured only where no rewritten one was accepted faster than eager."""

    plan: GraphPlan
    original: Union[Plan, GraphPlan]
    notes: list[str]


AnyPlan = Union[Plan, GraphPlan, RewrittenPlan]
_STATUS = re.compile(r"^status: (\w+)", re.M)
_MESSAGE = re.compile(r"^message: (.*)$", re.M)
_CANDIDATE_MS = re.compile(r"^\s*candidate\s+([0-9.]+)", re.M)
_SPEEDUP = re.compile(r"^\s*eager\s+[0-9.]+ \[[^\]]*\]\s+speedup ([0-9.]+)x", re.M)
_SOL = re.compile(r"; ([0-9.]+)% of the speed of light")
# A variant this close to its roof ends the search: on the H100 the memory roof measured by the peaks job is ~3.2 TB/s
# and eager's own ReLU at KernelBench's size reaches 94% of it, so the rest of the variants can only be as fast, and each
# costs a full evaluation (minutes at that size: docs/benchmarks.md §14).
NEAR_ROOF = 0.92
# A whole-graph plan's first two variants differ only in threads per block (256, then 128; 512 third, with scalar loads;
# a plan with convolutions varies their layout instead: gcodegen.graph_variants). Where the first two were
# timed within this much of each other, halving the threads changed nothing, so doubling them will not either: the
# kernels are bound by memory or by their own work, not by how many threads are in flight. At KernelBench's sizes each
# variant is a whole evaluation (one to four minutes on the H100: docs/benchmarks.md §14).
BLOCK_INDIFFERENT = 0.02


class BuiltinPolicy:
    """problem_source: the module being optimized; tracer: runs agent.builtin.trace in a sandbox
    (trace.traced on an Evaluator); device: "cpu" or "cuda"."""

    def __init__(self, problem_source: str, tracer: Tracer, device: str, chunk_chars: int = 80) -> None:
        self.problem_source, self.tracer, self.device = problem_source, tracer, device
        self.name = "builtin"
        self.chunk_chars = chunk_chars
        self._plan: AnyPlan | None = None

    def plan(self) -> AnyPlan:
        if self._plan is None:
            try:
                traced = self.tracer(self.problem_source)
            except ProblemError as exc:
                raise PolicyError(str(exc)) from None
            self._plan = make_plan(traced, self.device)
        return self._plan

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                on_text: Callable[[str], None] | None = None) -> PolicyTurn:
        plan = self.plan()
        options = variants(plan, self.device)
        tried = _tried(messages)
        turn_index = sum(1 for m in messages if m["role"] == "assistant")
        limit = next((t for t in tried if t["status"] == "capacity"), None)
        if limit is not None:
            # The engine's limit: the same for every variant, and no gap in the templates.
            raise PolicyError("the problem does not fit the device's memory (the evaluation engine's capacity verdict: "
                              f"{limit['message']}); no kernel can change that, so the built-in policy stops here")
        near = _near_roof(tried)
        # Only where the first two variants differ in threads per block alone (a plan with convolutions tries their
        # layout second: a tie there says nothing of the third variant).
        alike = _blocks_alike(tried) if isinstance(plan, (GraphPlan, RewrittenPlan)) and len(options) > 1 and \
            options[0].layout == options[1].layout else None
        # A fallback variant (scalar loads where the ones before used float4) is only for a problem where one of them
        # failed: after accepted ones it would cost an evaluation to learn nothing.
        fallback = len(tried) < len(options) and options[len(tried)].fallback and \
            all(t["status"] == "accepted" for t in tried)
        # A rewrite is there to be faster: one accepted but slower than eager sends the search on, through the
        # rewrite's other variants, to the module as written; one that beats eager ends it before the written form.
        won = _rewrite_won(options, tried)
        ahead = options[len(tried)] if len(tried) < len(options) else None
        if ahead is not None and ahead.rewritten and won is None:
            near = alike = None
            fallback = False
        written_skipped = won is not None and ahead is not None and not ahead.rewritten
        if ahead is not None and near is None and alike is None and not fallback and not written_skipped:
            variant = options[len(tried)]
            text = self._proposal(plan, variant, tried, len(options))
            call = ToolCall(f"call_{turn_index}_0", "write_candidate",
                            json.dumps({"source": candidate_source(plan, variant, self.device)}))
        else:
            accepted = [t for t in tried if t["status"] == "accepted"]
            if not accepted:
                raise PolicyError("none of the built-in policy's kernels was accepted: "
                                  + "; ".join(f"variant {i + 1}: {t['status']}" for i, t in enumerate(tried))
                                  + ". This is a gap in our templates; please report the problem module")
            best = max(accepted, key=lambda t: t["speedup"] or 0.0)
            if written_skipped:
                text = (f"The rewritten module was accepted at {won:.2f}x vs eager, faster than eager, so the module as "
                        f"written is not measured. Submitting the fastest accepted one, variant "
                        f"{tried.index(best) + 1} ({_figures(best)}).")
            elif alike is not None and len(tried) < len(options):
                text = (f"Variants 1 and 2 (256 and 128 threads per block) ran within {alike:.1%} of each other: the "
                        "kernels are not limited by the threads in flight, so 512 would not change them either, and the "
                        f"search stops. Submitting the fastest accepted one, variant {tried.index(best) + 1} "
                        f"({_figures(best)}).")
            elif fallback:
                text = (f"Variants 1 to {len(tried)} were all accepted; variant {len(tried) + 1} ({options[len(tried)].label}) "
                        f"is only the fallback for a problem where they fail, so the search stops. Submitting the fastest "
                        f"accepted one, variant {tried.index(best) + 1} ({_figures(best)}).")
            elif near is not None and len(tried) < len(options) and near > 1.0:
                # The engine's bound counts the module as written (a rewrite's sum through a GEMM skips its FLOPs).
                text = (f"Variant {len(tried)} runs at {near:.0%} of the speed of light of the module as written: the "
                        "rewrite removed work that bound counts, so no variant can gain what is left of it, and the "
                        f"search stops. Submitting the fastest accepted one, variant {tried.index(best) + 1} "
                        f"({_figures(best)}).")
            elif near is not None and len(tried) < len(options):
                text = (f"Variant {len(tried)} runs at {near:.0%} of the speed of light, within {1 - NEAR_ROOF:.0%} of "
                        f"the roof: the other {len(options) - len(tried)} variants could not gain more than that, so "
                        f"the search stops. Submitting the fastest accepted one, variant {tried.index(best) + 1} "
                        f"({_figures(best)}).")
            else:
                text = (f"All {len(options)} variants measured. The fastest accepted one is variant "
                        f"{tried.index(best) + 1} ({_figures(best)}); submitting it.")
            call = ToolCall(f"call_{turn_index}_0", "submit", json.dumps({"candidate": "best"}))
        if on_text is not None:
            for i in range(0, len(text), self.chunk_chars):
                on_text(text[i:i + self.chunk_chars])
        return PolicyTurn(text, [call], finish_reason="tool_calls")

    def close(self) -> None:
        """Nothing to release: the tracer's sandbox is the caller's."""

    def _proposal(self, plan: AnyPlan, variant: Variant, tried: list[dict[str, Any]], total: int) -> str:
        if not tried:
            rewrites = ""
            if isinstance(plan, RewrittenPlan):
                rewrites = ("Exact rewrites, each judged by the verdict (the module as written is measured too unless one "
                            "beats eager): "
                            + "; ".join(plan.notes) + ". ")
                plan = plan.plan
            analysis = rewrites + (describe_graph(plan) if isinstance(plan, GraphPlan) else describe(plan))
            if isinstance(plan, GraphPlan) and not plan.kernels():
                goal = ("Nothing to fuse: the candidate is the library call itself, in the layout that needs no copy; "
                        "about 1.0x against eager is the honest result.")
            else:
                goal = "The work is memory-bound, so the goal is one pass over memory."
            return f"Analysis: {analysis} {goal} Variant 1 of {total}: {variant.label}."
        last = tried[-1]
        verdict = f"Variant {len(tried)} was {last['status']}" + (f" ({_figures(last)})" if last["ms"] else "")
        return f"{verdict}. Next, variant {len(tried) + 1} of {total}: {variant.label}."


def make_plan(traced: dict[str, Any], device: str = "cpu") -> AnyPlan:
    """The plan of the module as written (_plan_as_written), led by a plan of its exact rewrites where any apply."""
    plan = _plan_as_written(traced, device)
    found = rewritten(traced)
    if found is None:
        return plan
    try:
        return RewrittenPlan(plan_graph(found.traced), plan, found.notes)
    except Unsupported:
        return plan  # the rewritten graph holds an op the planner refuses: the module as written is still planned


def _plan_as_written(traced: dict[str, Any], device: str) -> Union[Plan, GraphPlan]:
    """The single fused kernel of lower.py's tuned templates where the module is one region; else the
    whole graph as a sequence of library calls and generated kernels (graph.py). On a GPU a convolution's epilogue is
    planned as a whole graph too, whose variants include the channels-last layout (layout.py): on the H200, cuDNN's
    NHWC kernel ran KernelBench 2/1's convolution in 0.85 ms against 1.55 + 0.32 ms of conversion in NCHW, and the
    single-kernel template has no such variant."""
    try:
        plan = lower(traced)
    except Unsupported:
        plan = None
    if plan is not None and not (device == "cuda" and plan.anchor is not None and plan.anchor.kind == "conv2d"):
        return plan
    try:
        return plan_graph(traced)
    except Unsupported as exc:
        if plan is not None:
            return plan
        raise PolicyError(f"the built-in policy cannot optimize this module: {exc}. It plans pointwise chains, "
                          "reductions, softmax and the norms, pooling, scans and the common losses around "
                          "GEMM/convolution library calls; use an LLM endpoint for anything else") from None


def variants(plan: AnyPlan, device: str) -> list[Variant]:
    if isinstance(plan, RewrittenPlan):
        # The rewritten plan's variants first; the module as written where none of them beat eager (BuiltinPolicy).
        rewrite = "; " + "; ".join(plan.notes)
        return ([dataclasses.replace(v, label=v.label + rewrite, rewritten=True) for v in variants(plan.plan, device)]
                + [dataclasses.replace(v, label=v.label + "; the module as written") for v in variants(plan.original, device)])
    return gcodegen.graph_variants(plan, device) if isinstance(plan, GraphPlan) else codegen.variants(plan, device)


def candidate_source(plan: AnyPlan, variant: Variant, device: str) -> str:
    if isinstance(plan, RewrittenPlan):
        return candidate_source(plan.plan if variant.rewritten else plan.original, variant, device)
    if isinstance(plan, GraphPlan):
        return gcodegen.graph_source(plan, variant, device)
    return codegen.candidate_source(plan, variant, device)


def _rewrite_won(options: list[Variant], tried: list[dict[str, Any]]) -> float | None:
    """The best speedup vs eager of an accepted rewritten variant, where one beat eager; else None."""
    speedups = [t["speedup"] for t, o in zip(tried, options)
                if o.rewritten and t["status"] == "accepted" and (t["speedup"] or 0.0) >= 1.0]
    return max(speedups) if speedups else None


def _figures(t: dict[str, Any]) -> str:
    parts = [f"{t['ms']:.4f} ms"] if t["ms"] is not None else []
    if t["speedup"] is not None:
        parts.append(f"{t['speedup']:.2f}x vs eager")
    return ", ".join(parts) or "not timed"


def _near_roof(tried: list[dict[str, Any]]) -> float | None:
    """The last variant's fraction of the speed of light where it was accepted at NEAR_ROOF or more, else None."""
    last = tried[-1] if tried else None
    if last is None or last["status"] != "accepted" or last["sol"] is None or last["sol"] < NEAR_ROOF:
        return None
    return float(last["sol"])


def _blocks_alike(tried: list[dict[str, Any]]) -> float | None:
    """How far apart (relative) the first two variants' times were, where both were accepted, timed, and within
    BLOCK_INDIFFERENT of each other after exactly two; else None."""
    if len(tried) != 2 or any(t["status"] != "accepted" or not t["ms"] for t in tried):
        return None
    apart = abs(tried[0]["ms"] - tried[1]["ms"]) / min(tried[0]["ms"], tried[1]["ms"])
    return apart if apart <= BLOCK_INDIFFERENT else None


def _tried(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The verdict of every write_candidate so far, read from the tool results as a model reads them."""
    calls = {c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])
             if c["function"]["name"] == "write_candidate"}
    out = []
    for m in messages:
        if m["role"] == "tool" and m.get("tool_call_id") in calls:
            text = m.get("content") or ""
            status = _STATUS.search(text)
            ms, speedup = _CANDIDATE_MS.search(text), _SPEEDUP.search(text)
            message, sol = _MESSAGE.search(text), _SOL.search(text)
            out.append({"status": status.group(1) if status else "error", "message": message.group(1) if message else "",
                        "ms": float(ms.group(1)) if ms else None, "speedup": float(speedup.group(1)) if speedup else None,
                        "sol": float(sol.group(1)) / 100 if sol else None})
    return out
