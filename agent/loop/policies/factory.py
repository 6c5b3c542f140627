"""The one place a policy is built from its description: the command line (agent/cli.py) and the studio's model
endpoints (apps/endpoints/policies.py) both describe what they want here. Anything that cannot be built raises
PolicyError with what to fix; the caller adds whose configuration it was."""
from __future__ import annotations

from dataclasses import dataclass, field

from agent.builtin.policy import BuiltinPolicy, Tracer
from agent.loop.policies.base import Policy, PolicyError
from agent.loop.policies.openai_compat import OpenAIPolicy
from agent.loop.policies.scripted import ScriptedPolicy, ScriptedTurn

KINDS = ("builtin", "openai", "transformers", "scripted")


@dataclass
class PolicySpec:
    kind: str = field(metadata={"help": "builtin, openai, transformers or scripted."})
    model: str = field(default="", metadata={
        "help": "openai: the model name the endpoint serves; transformers: the checkpoint directory."})
    base_url: str = field(default="", metadata={"help": "openai: the endpoint's base URL (http:// or https://)."})
    api_key: str | None = field(default=None, metadata={"help": "openai: the API key; None: send none."})
    temperature: float = field(default=0.2, metadata={"help": "openai, transformers: sampling temperature."})
    max_tokens: int = field(default=4096, metadata={"help": "openai, transformers: the longest completion of a turn."})
    timeout_seconds: float = field(default=300.0, metadata={"help": "openai: seconds to wait for one answer."})
    retries: int = field(default=3, metadata={"help": "openai: retries of a failed request."})
    top_p: float = field(default=0.95, metadata={"help": "transformers: nucleus sampling's probability mass."})
    seed: int | None = field(default=None, metadata={"help": "transformers: sampling seed (turn i uses seed + i)."})
    model_device: str = field(default="", metadata={
        "help": "transformers: where the model runs, e.g. cuda:1; empty: the run's device."})
    script: list[ScriptedTurn] = field(default_factory=list, metadata={"help": "scripted: the turns to play."})
    name: str = field(default="", metadata={"help": "The policy's name for provenance; empty: the policy's own."})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PolicyError(f"unknown policy kind {self.kind!r}; choose {', '.join(KINDS)}")


def make_policy(spec: PolicySpec, *, device: str = "cpu", problem_source: str = "", tracer: Tracer | None = None,
                load: bool = False) -> Policy:
    """The policy `spec` describes, for a run on `device`. The built-in policy also needs the problem and a tracer
    (it reads the module's graph, traced in a sandbox). `load`: load a local checkpoint now, so a bad one is found
    before any evaluation starts."""
    if spec.kind == "builtin":
        if tracer is None or not problem_source:
            raise PolicyError("the built-in policy needs the problem and a sandbox to trace it in")
        return BuiltinPolicy(problem_source, tracer, device)
    if spec.kind == "openai":
        try:
            return OpenAIPolicy(spec.base_url, spec.model, spec.api_key, temperature=spec.temperature,
                                max_tokens=spec.max_tokens, timeout_seconds=spec.timeout_seconds, retries=spec.retries)
        except ValueError as exc:
            raise PolicyError(str(exc)) from None
    if spec.kind == "transformers":
        return _transformers(spec, device, load)
    policy = ScriptedPolicy(spec.script)
    if spec.name:
        policy.name = spec.name
    return policy


def _transformers(spec: PolicySpec, device: str, load: bool) -> Policy:
    if not spec.model:
        raise PolicyError("the transformers policy needs the checkpoint directory")
    try:
        # transformers is the `agent` extra's: a studio without it still serves every other kind.
        from agent.loop.policies.transformers_local import TransformersPolicy
    except ImportError as exc:
        raise PolicyError(f"local transformers checkpoints need the agent extra (pip install -e '.[agent]'): {exc}") from None
    try:
        policy = TransformersPolicy(spec.model, device=spec.model_device or device, temperature=spec.temperature,
                                    top_p=spec.top_p, max_new_tokens=spec.max_tokens, seed=spec.seed)
    except ValueError as exc:
        raise PolicyError(str(exc)) from None
    if load:
        policy.load()
    return policy
