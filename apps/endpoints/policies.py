"""Turning an admin-configured endpoint into an agent policy (in the worker that runs the model turn), through
agent.loop.policies.factory like the command line."""
from __future__ import annotations

import os

from agent.builtin.policy import Tracer
from agent.loop import Policy, PolicyError, PolicyTurn
from agent.loop import PolicySpec, make_policy
from agent.loop.policies.scripted import call
from apps.endpoints.models import ModelEndpoint, script_error


def policy_for(endpoint: ModelEndpoint, problem_source: str = "", tracer: Tracer | None = None,
               device: str = "cpu") -> Policy:
    """The policy an endpoint describes. The built-in policy also needs the problem and a tracer (it
    reads the module's graph, traced in the sandbox). Raises PolicyError with what to fix when the
    policy cannot be built."""
    try:
        return make_policy(spec_of(endpoint), device=device, problem_source=problem_source, tracer=tracer)
    except PolicyError as exc:
        raise PolicyError(f"endpoint {endpoint.name!r}: {exc}") from None


def spec_of(endpoint: ModelEndpoint) -> PolicySpec:
    kind = endpoint.kind
    if kind not in ModelEndpoint.Kind.values:
        raise PolicyError(f"it has an unknown kind {kind!r}")
    if kind == ModelEndpoint.Kind.OPENAI:
        api_key = None
        if endpoint.api_key_env:
            api_key = os.environ.get(endpoint.api_key_env)
            if not api_key:
                raise PolicyError(f"the environment variable {endpoint.api_key_env} that should hold its API key is not "
                                  "set on this worker; set it where the agent workers run")
        return PolicySpec(kind, model=endpoint.model, base_url=endpoint.base_url, api_key=api_key,
                          temperature=endpoint.temperature, max_tokens=endpoint.max_tokens,
                          timeout_seconds=endpoint.timeout_seconds, retries=endpoint.retries)
    if kind == ModelEndpoint.Kind.TRANSFORMERS:
        # An endpoint's checkpoint runs on the agent worker's CPU: the run's device is the GPU workers'.
        return PolicySpec(kind, model=endpoint.model, temperature=endpoint.temperature, max_tokens=endpoint.max_tokens,
                          model_device="cpu")
    if kind == ModelEndpoint.Kind.SCRIPTED:
        error = script_error(endpoint.script)
        if error:
            raise PolicyError(error)
        return PolicySpec(kind, script=[_scripted_turn(t, i) for i, t in enumerate(endpoint.script)],
                          name=f"scripted:{endpoint.name}")
    return PolicySpec(kind)


def _scripted_turn(turn: dict, index: int) -> PolicyTurn:
    calls = []
    for j, c in enumerate(turn.get("tool_calls", [])):
        # A string is sent as is (it may be deliberately malformed JSON); an object is encoded.
        calls.append(call(c["name"], c.get("arguments", {}), id=f"call_{index}_{j}"))
    return PolicyTurn(turn.get("text", ""), calls)
