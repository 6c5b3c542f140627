"""Turning an admin-configured endpoint into an agent policy (in the worker that runs the model turn)."""
from __future__ import annotations

import os

from agent.builtin.policy import Tracer
from agent.policies.base import Policy, PolicyError, PolicyTurn
from agent.policies.scripted import ScriptedPolicy, call
from apps.endpoints.models import ModelEndpoint, script_error


def policy_for(endpoint: ModelEndpoint, problem_source: str = "", tracer: Tracer | None = None,
               device: str = "cpu") -> Policy:
    """The policy an endpoint describes. The built-in policy also needs the problem and a tracer (it
    reads the module's graph, traced in the sandbox). Raises PolicyError with what to fix when the
    policy cannot be built."""
    kind = endpoint.kind
    if kind == ModelEndpoint.Kind.BUILTIN:
        from agent.builtin.policy import BuiltinPolicy

        if tracer is None or not problem_source:
            raise PolicyError("the built-in policy needs the problem and a sandbox to trace it in")
        return BuiltinPolicy(problem_source, tracer, device)
    if kind == ModelEndpoint.Kind.OPENAI:
        from agent.policies.openai_compat import OpenAIPolicy

        api_key = None
        if endpoint.api_key_env:
            api_key = os.environ.get(endpoint.api_key_env)
            if not api_key:
                raise PolicyError(f"endpoint {endpoint.name!r}: the environment variable {endpoint.api_key_env} that should "
                                  "hold its API key is not set on this worker; set it where the agent workers run")
        try:
            return OpenAIPolicy(endpoint.base_url, endpoint.model, api_key, temperature=endpoint.temperature,
                                max_tokens=endpoint.max_tokens, timeout_seconds=endpoint.timeout_seconds,
                                retries=endpoint.retries)
        except ValueError as exc:
            raise PolicyError(f"endpoint {endpoint.name!r} is misconfigured: {exc}") from None
    if kind == ModelEndpoint.Kind.TRANSFORMERS:
        try:
            from agent.policies.transformers_local import TransformersPolicy
        except ImportError as exc:
            raise PolicyError(f"endpoint {endpoint.name!r}: local transformers checkpoints need the agent extra ({exc})") from None
        return TransformersPolicy(endpoint.model, temperature=endpoint.temperature, max_new_tokens=endpoint.max_tokens)
    if kind == ModelEndpoint.Kind.SCRIPTED:
        error = script_error(endpoint.script)
        if error:
            raise PolicyError(f"endpoint {endpoint.name!r}: {error}")
        policy = ScriptedPolicy([_scripted_turn(t, i) for i, t in enumerate(endpoint.script)])
        policy.name = f"scripted:{endpoint.name}"
        return policy
    raise PolicyError(f"endpoint {endpoint.name!r} has an unknown kind {kind!r}")


def _scripted_turn(turn: dict, index: int) -> PolicyTurn:
    calls = []
    for j, c in enumerate(turn.get("tool_calls", [])):
        # A string is sent as is (it may be deliberately malformed JSON); an object is encoded.
        calls.append(call(c["name"], c.get("arguments", {}), id=f"call_{index}_{j}"))
    return PolicyTurn(turn.get("text", ""), calls)
