"""The tools the agent's model calls, with their JSON schemas in the OpenAI function format.

A tool call is the model's action; what comes back is an observation: plain text, a few KB at most,
that the model reads on its next turn. The model's mistakes (malformed JSON, an unknown tool, a
missing argument, a kernel that does not build or is wrong) become observations; our bugs raise.
The toolbox keeps no run state of its own: what it needs (the problem, the best and latest
candidates) it reads from the AgentState it is given, so one toolbox (one warm Evaluator) serves
many runs and a run survives a restart.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.evaluate.progress import Watcher
from agent.loop.policies.base import ToolCall
from agent.engine.verdict import Status, Verdict

if TYPE_CHECKING:
    from agent.loop.state import AgentState

# What a model reads of one verdict: enough to act on, small enough for many turns in its context.
OBSERVATION_CHARS = 4000
LOG_TAIL_CHARS = 2000
MESSAGE_CHARS = 1500

Knowledge = Callable[[str], str]


def no_knowledge_base(query: str) -> str:
    return "no knowledge base is configured for this run; rely on the skills (read_skill) and your own measurements"


class ToolError(Exception):
    """The model called a tool wrongly; the message is the observation it reads next turn."""


@dataclass
class ToolOutcome:
    content: str
    """The observation the model reads (the tool message's content)."""
    verdict: Verdict | None = None
    """The evaluation this call ran, if any."""
    source: str | None = None
    """The candidate source that verdict judged."""
    submitted: bool = False
    """True when the call ended the run with a verified candidate."""
    error: bool = False
    """True when the call was malformed or refused (the model's mistake)."""


_WHICH = {"type": "string", "enum": ["best", "latest"],
          "description": "which candidate: 'best' (fastest accepted so far) or 'latest' (the last one written); default 'best'"}

TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "write_candidate",
        "description": ("Write a complete candidate module (imports, kernel sources, class ModelNew with the same "
                        "constructor and forward signature as Model) and evaluate it: build, check against the "
                        "reference on several fresh inputs, time it against PyTorch eager and torch.compile. "
                        "Returns the verdict: status, errors per trial, flags, timings and speedups, build log on errors."),
        "parameters": {"type": "object", "properties": {
            "source": {"type": "string", "description": "the full Python source of the candidate module"}},
            "required": ["source"]}}},
    {"type": "function", "function": {
        "name": "benchmark",
        "description": "Re-time a candidate (fresh inputs, correctness re-checked) to confirm its speed; returns the timing table.",
        "parameters": {"type": "object", "properties": {"candidate": _WHICH}, "required": []}}},
    {"type": "function", "function": {
        "name": "profile",
        "description": ("Profile a candidate: where its time goes per kernel or operator (Nsight Compute on GPUs "
                        "where installed, torch.profiler otherwise)."),
        "parameters": {"type": "object", "properties": {"candidate": _WHICH}, "required": []}}},
    {"type": "function", "function": {
        "name": "read_skill",
        "description": "Read a skill document: practical guidance on one kernel-writing topic.",
        "parameters": {"type": "object", "properties": {
            "name": {"type": "string", "description": "the skill's name"}}, "required": ["name"]}}},
    {"type": "function", "function": {
        "name": "search_knowledge",
        "description": "Search the knowledge base of past optimizations for techniques relevant to a query.",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "what you are looking for"}}, "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "submit",
        "description": ("End the run with the best accepted candidate. Refused when no candidate was accepted, or "
                        "when candidate='latest' and the latest one was not accepted."),
        "parameters": {"type": "object", "properties": {"candidate": _WHICH}, "required": []}}},
]
TOOL_NAMES = tuple(t["function"]["name"] for t in TOOL_SCHEMAS)


def list_skills() -> list[str]:
    """The skill documents available, or none while agent.loop.skills is not installed."""
    try:
        from agent.loop.skills import list_skills as installed_skills
    except ImportError:
        return []
    return list(installed_skills())


def tool_schemas() -> list[dict[str, Any]]:
    """The schemas the model sees (a fresh copy), with the installed skills named in read_skill's."""
    schemas = json.loads(json.dumps(TOOL_SCHEMAS))
    skills = list_skills()
    if skills:
        for schema in schemas:
            if schema["function"]["name"] == "read_skill":
                schema["function"]["description"] += " Available: " + ", ".join(skills) + "."
    return schemas


class Toolbox:
    """Runs tool calls against a warm Evaluator. One toolbox serves many runs (it holds no run state)."""

    def __init__(self, evaluator: Evaluator, config: EvalConfig | None = None,
                 knowledge: Knowledge = no_knowledge_base, on_phase: Watcher | None = None) -> None:
        self.evaluator = evaluator
        self.config = config or evaluator.config
        self.knowledge = knowledge
        self.on_phase = on_phase  # watches each evaluation's phases (agent/engine/evaluate/progress.py)

    @property
    def device(self) -> str:
        return self.config.device

    def schemas(self) -> list[dict[str, Any]]:
        return tool_schemas()

    def call(self, state: AgentState, call: ToolCall) -> ToolOutcome:
        try:
            arguments = _arguments(call)
            if call.name == "write_candidate":
                return self.write_candidate(state, _string(arguments, "source", call.name))
            if call.name == "benchmark":
                return self.benchmark(state, _which(arguments, call.name))
            if call.name == "profile":
                return self.profile(state, _which(arguments, call.name))
            if call.name == "read_skill":
                return ToolOutcome(read_skill(_string(arguments, "name", call.name)))
            if call.name == "search_knowledge":
                return ToolOutcome(self.knowledge(_string(arguments, "query", call.name)))
            if call.name == "submit":
                return submit(state, _which(arguments, call.name))
            raise ToolError(f"unknown tool {call.name!r}; the tools are: {', '.join(TOOL_NAMES)}")
        except ToolError as exc:
            return ToolOutcome(f"error: {exc}", error=True)

    # ---------------------------------------------------------------------------------- tools

    def write_candidate(self, state: AgentState, source: str) -> ToolOutcome:
        if "ModelNew" not in source:
            raise ToolError("the source defines no class ModelNew; write the whole module, with class ModelNew")
        verdict = self.evaluator.evaluate(state.problem_source, source, self.config, on_phase=self.on_phase)
        return ToolOutcome(verdict_observation(verdict), verdict=verdict, source=source)

    def benchmark(self, state: AgentState, which: str) -> ToolOutcome:
        source = _candidate_source(state, which)
        verdict = self.evaluator.evaluate(state.problem_source, source, self.config, on_phase=self.on_phase)
        return ToolOutcome(f"benchmark of the {which} candidate\n" + verdict_observation(verdict),
                           verdict=verdict, source=source)

    def profile(self, state: AgentState, which: str) -> ToolOutcome:
        source = _candidate_source(state, which)
        verdict = self.evaluator.evaluate(state.problem_source, source, dataclasses.replace(self.config, profile=True),
                                          on_phase=self.on_phase)
        text = f"profile of the {which} candidate\n" + verdict_observation(verdict)
        if verdict.profile:
            text = _cap(text + "\n" + profile_text(verdict.profile), OBSERVATION_CHARS + 2000)
        else:
            text += "\nno profile: the candidate did not run to the end"
        return ToolOutcome(text, verdict=verdict, source=source)


def read_skill(name: str) -> str:
    try:
        from agent.loop.skills import read_skill as read_installed_skill
    except ImportError:
        raise ToolError("no skill documents are installed on this server") from None
    available = list_skills()
    if name not in available:
        raise ToolError(f"unknown skill {name!r}; available: {', '.join(available) or 'none'}")
    return read_installed_skill(name)


def submit(state: AgentState, which: str) -> ToolOutcome:
    latest = state.latest
    if which == "latest":
        if latest is None:
            raise ToolError("nothing to submit: write a candidate with write_candidate first")
        if latest["status"] != Status.ACCEPTED.value:
            raise ToolError(f"refused: the latest candidate (turn {latest['turn'] + 1}) was {latest['status']}, not accepted: "
                            f"{latest['message'][:300]}. Fix it, or submit with candidate='best'")
    if state.best is None:
        status = f" (the latest was {latest['status']})" if latest else ""
        raise ToolError(f"refused: no candidate has been accepted yet{status}; only a verified kernel can be submitted")
    best = state.best
    return ToolOutcome(f"submitted the best accepted candidate (turn {best['turn'] + 1}, "  # counted from 1, as shown
                       f"{_speedups(best['summary'])}); the run is over", submitted=True)


# ---------------------------------------------------------------------------------- observations

def verdict_observation(verdict: Verdict) -> str:
    """The verdict as a model should read it: status first, then what to act on, capped."""
    lines = [f"status: {verdict.status.value} (reached stage {verdict.stage.value})",
             "message: " + _cap(verdict.message, MESSAGE_CHARS)]
    if verdict.status is Status.CAPACITY:
        lines.append("this is the evaluation engine's memory limit for this problem on this device, not a fault of "
                     "your kernel: no change to the candidate can fix it")
    for finding in verdict.flags:
        lines.append(f"flag {finding.flag.value}: {_cap(finding.detail, 300)}")
    if verdict.trials:
        lines.append("trials (max abs error / max rel error, tolerance atol / rtol):")
        for t in verdict.trials:
            lines.append(f"  {t.index} {t.distribution:<12} {'ok ' if t.passed else 'BAD'} {t.max_abs_error:.3g} / "
                         f"{t.max_rel_error:.3g} (atol {t.atol:.3g}, rtol {t.rtol:.3g})"
                         + (f" {t.mismatched}/{t.numel} out of tolerance" if not t.passed else "")
                         + (f"; {_cap(t.note, 200)}" if t.note else ""))
    if verdict.timing:
        t = verdict.timing
        lines.append("timing (median ms [p10-p90]):")
        lines.append(f"  candidate     {t.candidate.median_ms:.4f} [{t.candidate.p10_ms:.4f}-{t.candidate.p90_ms:.4f}]")
        lines.append(f"  eager         {t.eager.median_ms:.4f} [{t.eager.p10_ms:.4f}-{t.eager.p90_ms:.4f}]  "
                     f"speedup {t.speedup_vs_eager:.2f}x")
        if t.compile is not None and t.speedup_vs_compile is not None:
            lines.append(f"  torch.compile {t.compile.median_ms:.4f} [{t.compile.p10_ms:.4f}-{t.compile.p90_ms:.4f}]  "
                         f"speedup {t.speedup_vs_compile:.2f}x")
        elif t.compile_note:
            lines.append(f"  torch.compile: {_cap(t.compile_note, 300)}")
        if t.speedup_vs_best is not None:
            lines.append(f"  headline: {t.speedup_vs_best:.2f}x vs the faster of eager and torch.compile"
                         + (f"; {t.sol_fraction:.1%} of the speed of light ({t.sol_bound}-bound, {t.sol_ms:.4f} ms at "
                            "the device's measured peaks)" if t.sol_fraction is not None else ""))
        for v in t.variants:  # the problem's other input shapes, each timed on its own
            if v["candidate_ms"] is not None:
                lines.append(f"  {v['label']:<13} candidate {v['candidate_ms']:.4f}, eager {v['eager_ms']:.4f}  "
                             f"speedup {v['speedup_vs_eager'] or 0.0:.2f}x")
    if verdict.status is Status.BUILD_ERROR and verdict.build is not None and verdict.build.log.strip():
        lines.append("build log (tail):\n" + _tail(verdict.build.log, LOG_TAIL_CHARS))
    if verdict.status in (Status.RUNTIME_ERROR, Status.TIMEOUT) and verdict.stderr.strip():
        lines.append("stderr (tail):\n" + _tail(verdict.stderr, LOG_TAIL_CHARS))
    return _cap("\n".join(lines), OBSERVATION_CHARS)


def profile_text(profile: dict[str, Any]) -> str:
    lines = [f"profile ({profile.get('tool')}, {profile.get('note', '')}):"]
    if profile.get("error"):
        lines.append(f"  error: {_cap(str(profile['error']), 500)}")
    for k in profile.get("kernels", [])[:10]:
        fields = ", ".join(f"{key} {value}" for key, value in k.items() if key != "name")
        lines.append(f"  {k.get('name', '?')[:120]}: {fields}")
    if "total_us" in profile:
        lines.append(f"  total {profile['total_us']} us")
    return "\n".join(lines)


def verdict_summary(verdict: Verdict) -> dict[str, Any]:
    """The few facts of a verdict a run keeps per turn (the whole verdict is kept for the best only)."""
    t = verdict.timing
    return {"status": verdict.status.value, "correct": verdict.correct, "message": _cap(verdict.message, 500),
            "flags": verdict.flag_names(),
            "candidate_ms": t.candidate_ms if t else None,
            "speedup_vs_eager": t.speedup_vs_eager if t else None,
            "speedup_vs_compile": t.speedup_vs_compile if t else None,
            "speedup_vs_best": t.speedup_vs_best if t else None,
            "sol_fraction": t.sol_fraction if t else None}


def _speedups(summary: dict[str, Any]) -> str:
    if summary.get("speedup_vs_eager") is None:
        return "not timed"
    text = f"{summary['speedup_vs_eager']:.2f}x vs eager"
    if summary.get("speedup_vs_compile") is not None:
        text += f", {summary['speedup_vs_compile']:.2f}x vs torch.compile"
    return text


# ---------------------------------------------------------------------------------- arguments

def _arguments(call: ToolCall) -> dict[str, Any]:
    if call.name not in TOOL_NAMES:
        raise ToolError(f"unknown tool {call.name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    if not call.arguments.strip():
        return {}
    try:
        arguments = json.loads(call.arguments)
    except json.JSONDecodeError as exc:
        raise ToolError(f"the arguments of {call.name} are not valid JSON ({exc.msg} at line {exc.lineno} column "
                        f"{exc.colno}); send one JSON object, with strings escaped") from None
    if not isinstance(arguments, dict):
        raise ToolError(f"the arguments of {call.name} must be a JSON object, not {type(arguments).__name__}")
    return arguments


def _string(arguments: dict[str, Any], key: str, tool: str) -> str:
    if key not in arguments:
        raise ToolError(f"{tool} needs the argument {key!r}")
    value = arguments[key]
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{tool}'s argument {key!r} must be a non-empty string")
    return value


def _which(arguments: dict[str, Any], tool: str) -> str:
    which = arguments.get("candidate", "best")
    if which not in ("best", "latest"):
        raise ToolError(f"{tool}'s argument 'candidate' must be 'best' or 'latest', not {which!r}")
    return which


def _candidate_source(state: AgentState, which: str) -> str:
    if which == "best" and state.best is not None:
        return state.best["source"]
    if state.latest is None:
        raise ToolError("no candidate yet: write one with write_candidate first")
    return state.latest["source"]


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n... [{len(text) - limit} characters cut] ...\n{text[-half:]}"


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]
