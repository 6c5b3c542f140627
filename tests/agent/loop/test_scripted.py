import pytest

from agent.loop.policies.base import PolicyError, PolicyTurn
from agent.loop.policies.scripted import ScriptedPolicy, call


def test_it_plays_the_turn_that_follows_the_conversation():
    policy = ScriptedPolicy([PolicyTurn("one"), lambda messages: PolicyTurn(f"two after {len(messages)} messages")])
    assert policy.respond([{"role": "user", "content": "go"}], []).text == "one"
    history = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "one"}]
    assert policy.respond(history, []).text == "two after 2 messages"
    assert policy.name == "scripted"


def test_it_streams_its_text_in_chunks():
    chunks = []
    ScriptedPolicy([PolicyTurn("abcdefghij")]).respond([], [], chunks.append)
    assert chunks == ["abcd", "efgh", "ij"]


def test_it_raises_a_policy_error_when_the_script_is_over():
    with pytest.raises(PolicyError):
        ScriptedPolicy([]).respond([], [])


def test_it_sends_raw_arguments_as_given():
    assert call("submit", "{oops").arguments == "{oops"
    assert call("submit", {"candidate": "best"}).arguments == '{"candidate": "best"}'
