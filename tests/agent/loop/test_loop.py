"""The agent loop, driven by scripted policies through the real tools and the real engine on the CPU."""
import json

import pytest

from agent.loop import runner as loop
from agent.engine.evaluate import ProblemError
from agent.loop.runner import AgentState, Budgets
from agent.loop.policies.base import PolicyTurn
from agent.loop.policies.scripted import ScriptedPolicy, call, submit, write
from tests.agent.loop.conftest import PROBLEM, candidate


def _tool_messages(state: AgentState) -> list[str]:
    return [m["content"] for m in state.messages if m["role"] == "tool"]


def _run(toolbox, turns, budgets=None, **kwargs) -> AgentState:
    state = loop.start(PROBLEM, toolbox)
    return loop.run(state, ScriptedPolicy(turns), toolbox, budgets or Budgets(max_turns=len(turns)), **kwargs)


@pytest.fixture(scope="module")
def wrong_right_submit():
    """A wrong kernel, a right one, a re-timing, a submit: the run every resume test must reproduce."""
    return [write(candidate("fault_py_wrong_shape"), "A first try."),
            write(candidate("legit_cpp_silu_bias"), "A fused C++ kernel."),
            PolicyTurn("Re-timing.", [call("benchmark", {"candidate": "best"})]),
            submit("latest")]


def test_it_starts_with_the_task_the_backends_and_the_problem(toolbox):
    state = loop.start(PROBLEM, toolbox)
    system = state.messages[0]["content"]
    assert "ModelNew" in system and "load_inline" in system and "class Model(nn.Module)" in system
    assert {t["function"]["name"] for t in state.tools} == {"write_candidate", "benchmark", "profile", "read_skill",
                                                           "search_knowledge", "submit"}
    assert state.messages[1]["role"] == "user"


def test_it_refuses_to_start_on_an_invalid_problem(toolbox):
    with pytest.raises(ProblemError):
        loop.start("import torch\n", toolbox)


def test_it_feeds_back_malformed_tool_arguments(toolbox):
    state = _run(toolbox, [PolicyTurn("", [call("write_candidate", '{"source": "class ModelNew')])])
    assert "not valid JSON" in _tool_messages(state)[0]
    assert state.turns[0].errors == 1 and state.status == loop.STOPPED
    assert state.messages[-1]["tool_call_id"] == "call_write_candidate"


def test_it_feeds_back_an_unknown_tool_and_missing_arguments(toolbox):
    state = _run(toolbox, [PolicyTurn("", [call("compile_kernel", {"x": 1}, id="a"), call("read_skill", {}, id="b"),
                                           call("write_candidate", {"source": 3}, id="c")])])
    unknown, missing, wrong_type = _tool_messages(state)
    assert "unknown tool 'compile_kernel'" in unknown and "write_candidate" in unknown
    assert "needs the argument 'name'" in missing
    assert "must be a non-empty string" in wrong_type
    assert state.turns[0].errors == 3


def test_it_tells_the_model_to_call_a_tool_when_it_called_none(toolbox):
    state = _run(toolbox, [PolicyTurn("Let me think about this."), PolicyTurn("Still thinking.")])
    assert [m["content"] for m in state.messages if m["role"] == "user"][1:] == [loop.NO_TOOL_CALL] * 2
    assert state.turn == 2 and state.stop_reason.startswith("turn budget spent")


def test_it_answers_an_unknown_skill_and_the_default_knowledge_base(toolbox):
    state = _run(toolbox, [PolicyTurn("", [call("read_skill", {"name": "no-such-skill"}, id="a"),
                                           call("search_knowledge", {"query": "vectorised exp"}, id="b")])])
    skill, knowledge = _tool_messages(state)
    assert skill.startswith("error:") and "skill" in skill
    assert "no knowledge base" in knowledge


def test_it_feeds_back_a_compile_error(toolbox):
    state = _run(toolbox, [write(candidate("fault_cpp_build_error"))])
    observation = _tool_messages(state)[0]
    assert observation.startswith("status: build_error")
    assert "error:" in observation and "before" in observation  # the compiler's own words
    assert state.turns[0].reward == -1.0 and state.best is None
    assert len(observation) < 6000


def test_it_feeds_back_a_wrong_kernel_and_refuses_to_submit_it(toolbox):
    state = _run(toolbox, [write(candidate("fault_py_wrong_shape")), submit("latest"), submit("best")])
    wrong, refused_latest, refused_best = _tool_messages(state)
    assert wrong.startswith("status: incorrect") and "BAD" in wrong
    assert "refused" in refused_latest and "incorrect" in refused_latest
    assert "refused" in refused_best and "no candidate has been accepted" in refused_best
    assert state.status == loop.STOPPED and state.best is None
    assert [t.reward for t in state.turns] == [-1.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def submitted(evaluator, wrong_right_submit):
    from tests.agent.loop.conftest import CONFIG
    from agent.loop.tools import Toolbox

    return _run(Toolbox(evaluator, CONFIG), wrong_right_submit, Budgets(max_turns=10))


def test_it_submits_the_best_accepted_kernel(submitted):
    state = submitted
    assert state.status == loop.SUBMITTED and state.turn == 4
    assert state.best["turn"] in (1, 2)  # the re-timing of the same source keeps the newest figures
    assert state.best["source"] == candidate("legit_cpp_silu_bias")
    verdict = state.best_verdict()
    assert verdict.accepted and verdict.timing is not None
    rewards = [t.reward for t in state.turns]
    assert rewards[0] == -1.0 and rewards[1] >= 1.0 and rewards[2] >= 1.0 and rewards[3] == 0.0
    assert "timing (median ms" in _tool_messages(state)[1] and "speedup" in _tool_messages(state)[1]
    assert state.gpu_seconds > 0 and state.tokens > 0 and state.policy == "scripted"
    # Counted from 1 in what a person reads, as the run page counts its turns; the state keeps the 0-based index.
    shown = state.best["turn"] + 1
    assert state.stop_reason == f"submitted the candidate of turn {shown}"
    assert _tool_messages(state)[-1].startswith(f"submitted the best accepted candidate (turn {shown}, ")


def test_it_profiles_the_best_candidate(submitted, toolbox):
    outcome = toolbox.call(submitted, call("profile", {"candidate": "best"}))
    assert not outcome.error and "profile (torch.profiler" in outcome.content


def test_it_resumes_from_json_to_the_same_result(toolbox, submitted, wrong_right_submit):
    state = loop.start(PROBLEM, toolbox)
    budgets = Budgets(max_turns=10)
    for _ in range(2):
        state = loop.step(state, ScriptedPolicy(wrong_right_submit), toolbox, budgets)
    saved = json.loads(json.dumps(state.to_dict()))  # what a database row would hold
    resumed = AgentState.from_dict(saved)
    assert resumed.to_dict() == state.to_dict()
    resumed = loop.run(resumed, ScriptedPolicy(wrong_right_submit), toolbox, budgets)
    assert resumed.status == submitted.status and resumed.turn == submitted.turn
    assert resumed.best["source"] == submitted.best["source"]
    # Statuses, not rewards: the speed milestones depend on this noisy box's timings.
    statuses = [[v["status"] for v in t.verdicts] for t in submitted.turns]
    assert [[v["status"] for v in t.verdicts] for t in resumed.turns] == statuses
    assert [m["role"] for m in resumed.messages] == [m["role"] for m in submitted.messages]


def test_it_stops_when_the_token_budget_is_spent(toolbox):
    turn = PolicyTurn("", [call("search_knowledge", {"query": "tiling"})], prompt_tokens=400, completion_tokens=100)
    state = _run(toolbox, [turn] * 5, Budgets(max_turns=5, max_tokens=1000))
    assert state.turn == 2 and state.status == loop.STOPPED and "token budget" in state.stop_reason


def test_it_stops_when_the_turn_budget_is_spent_before_the_first_turn_of_a_resumed_run(toolbox):
    state = _run(toolbox, [PolicyTurn("", [call("search_knowledge", {"query": "x"})])] * 3, Budgets(max_turns=3))
    resumed = AgentState.from_json(state.to_json())
    resumed.status = loop.RUNNING  # as if the budget had been raised, then lowered again
    assert loop.step(resumed, ScriptedPolicy([]), toolbox, Budgets(max_turns=2)).stop_reason.startswith("turn budget")


def test_it_stops_when_cancelled_between_steps(toolbox):
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > 1

    state = _run(toolbox, [PolicyTurn("", [call("search_knowledge", {"query": "x"})])] * 5, Budgets(max_turns=5),
                 cancelled=cancelled)
    assert state.status == loop.CANCELLED and state.turn == 1


def test_it_fails_visibly_when_the_policy_cannot_answer(toolbox):
    state = _run(toolbox, [], Budgets(max_turns=3))
    assert state.status == loop.FAILED and "policy error" in state.stop_reason


def test_it_streams_the_policy_text(toolbox):
    chunks = []
    _run(toolbox, [PolicyTurn("Reading the problem first, then a kernel.", [call("search_knowledge", {"query": "x"})])],
         on_text=chunks.append)
    assert len(chunks) == 3 and "".join(chunks) == "Reading the problem first, then a kernel."


def test_it_reads_an_installed_skill_and_lists_the_skills_in_the_prompt(toolbox):
    from agent.loop.tools import list_skills

    skills = list_skills()
    if not skills:
        pytest.skip("agent.loop.skills is not installed in this checkout")
    state = _run(toolbox, [PolicyTurn("", [call("read_skill", {"name": skills[0]})])])
    assert not _tool_messages(state)[0].startswith("error:") and len(_tool_messages(state)[0]) > 100
    assert skills[0] in state.messages[0]["content"]
