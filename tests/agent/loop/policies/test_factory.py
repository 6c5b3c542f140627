"""One factory builds every policy (agent/loop/policies/factory.py); what cannot be built says what to fix."""
import pytest

from agent.loop.policies.base import PolicyError, PolicyTurn
from agent.loop.policies.factory import PolicySpec, make_policy


def test_it_builds_a_scripted_policy_under_the_name_it_is_given():
    policy = make_policy(PolicySpec("scripted", script=[PolicyTurn("hi", [])], name="scripted:demo"))
    assert policy.name == "scripted:demo" and policy.respond([], []).text == "hi"
    policy.close()


def test_it_builds_an_openai_policy_and_refuses_a_bad_url():
    policy = make_policy(PolicySpec("openai", model="m", base_url="http://127.0.0.1:9/v1", retries=0))
    assert policy.name.startswith("openai")
    policy.close()
    with pytest.raises(PolicyError, match="http"):
        make_policy(PolicySpec("openai", model="m", base_url="ftp://x"))


@pytest.mark.parametrize("spec, expect", [(lambda: PolicySpec("nope"), "unknown policy kind"),
                                          (lambda: PolicySpec("builtin"), "needs the problem")])
def test_it_says_what_is_missing(spec, expect):
    with pytest.raises(PolicyError, match=expect):
        make_policy(spec())
