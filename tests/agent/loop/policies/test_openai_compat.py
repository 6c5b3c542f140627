"""OpenAIPolicy against a real OpenAI-compatible server (`transformers serve`, tiny random model)."""
from __future__ import annotations

import time

import pytest

from agent.loop.policies import PolicyError, PolicyTurn
from agent.loop.policies.openai_compat import OpenAIPolicy
from tests.agent.loop.policies.serving import Served, free_port

TOOLS = [{
    "type": "function",
    "function": {
        "name": "compile_candidate",
        "description": "Compile a candidate ModelNew and report build errors.",
        "parameters": {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]},
    },
}]


def messages(text: str = "Write a fast ReLU kernel.") -> list[dict]:
    return [{"role": "system", "content": "You write GPU kernels."}, {"role": "user", "content": text}]


def test_it_streams_text_in_several_chunks_that_add_up_to_the_turn(tiny_server: Served) -> None:
    chunks: list[str] = []
    with OpenAIPolicy(tiny_server.base_url, tiny_server.model, max_tokens=24, temperature=1.0) as policy:
        turn = policy.respond(messages(), [], on_text=chunks.append)
    assert isinstance(turn, PolicyTurn)
    assert len(chunks) > 1
    assert "".join(chunks) == turn.text
    assert turn.finish_reason in ("length", "stop")
    assert turn.prompt_tokens and turn.prompt_tokens > 0
    assert turn.completion_tokens and turn.completion_tokens > 0


def test_it_completes_a_request_with_tools_and_a_tool_exchange(tiny_server: Served) -> None:
    # A conversation that already holds a tool call and its result, rendered by the server's
    # Qwen2.5-style template: the request must be accepted and produce a well-formed turn.
    history = messages() + [
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_0", "type": "function",
                         "function": {"name": "compile_candidate", "arguments": '{"source": "import torch"}'}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": "build ok"},
    ]
    with OpenAIPolicy(tiny_server.base_url, tiny_server.model, max_tokens=16) as policy:
        turn = policy.respond(history, TOOLS)
    assert isinstance(turn.text, str)
    assert turn.finish_reason in ("length", "stop", "tool_calls")
    for call in turn.tool_calls:  # gibberish rarely forms a call; when it does, it is well-formed
        assert call.id and isinstance(call.name, str) and isinstance(call.arguments, str)
    assert turn.prompt_tokens and turn.prompt_tokens > 0
    assert turn.completion_tokens and turn.completion_tokens > 0
    message = turn.as_message()
    assert message["role"] == "assistant" and message["content"] == turn.text


def test_it_fails_fast_and_names_the_url_when_nothing_listens() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    policy = OpenAIPolicy(url, "any-model", retries=1, backoff_seconds=0.05, timeout_seconds=5)
    started = time.monotonic()
    with pytest.raises(PolicyError) as caught:
        policy.respond(messages(), [])
    assert time.monotonic() - started < 5
    assert f"{url}/chat/completions" in str(caught.value)
    assert "could not connect" in str(caught.value) and "2 attempts" in str(caught.value)


def test_it_explains_a_wrong_model_name_with_the_servers_message(tiny_server: Served) -> None:
    with OpenAIPolicy(tiny_server.base_url, "no-such/model", retries=0) as policy:
        with pytest.raises(PolicyError) as caught:
            policy.respond(messages(), [])
    text = str(caught.value)
    assert "no-such/model" in text
    assert "HTTP 400" in text and "pinned" in text  # the server's own explanation is passed on


def test_it_explains_a_wrong_base_url(tiny_server: Served) -> None:
    wrong = tiny_server.base_url.removesuffix("/v1") + "/api"
    with OpenAIPolicy(wrong, tiny_server.model, retries=0) as policy:
        with pytest.raises(PolicyError) as caught:
            policy.respond(messages(), [])
    assert "404" in str(caught.value) and "base URL" in str(caught.value)
    assert wrong in str(caught.value)


def test_it_rejects_a_base_url_without_a_scheme() -> None:
    with pytest.raises(ValueError, match="http://"):
        OpenAIPolicy("127.0.0.1:8000/v1", "m")
