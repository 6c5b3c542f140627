"""Agent runs through the run state machine, step by step in this process: a scripted endpoint, the
real evaluation engine (cpp on the CPU), the real database."""
from __future__ import annotations

import pytest

from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.problems.services import create_problem
from apps.runs import steps
from apps.runs.models import Run
from apps.runs.services import cancel_run, start_agent_run
from tests.apps.cast import BAD_BUILD_CANDIDATE, GOOD_CANDIDATE, PROBLEM
from tests.apps.runs.drive import drive

pytestmark = pytest.mark.django_db

WRONG = GOOD_CANDIDATE.parent / "fault_py_wrong_shape.py"


def scripted(name: str, turns: list[dict]) -> ModelEndpoint:
    endpoint = ModelEndpoint(name=name, kind=ModelEndpoint.Kind.SCRIPTED, script=turns)
    endpoint.full_clean()
    endpoint.save()
    return endpoint


def write(path) -> dict:
    return {"text": f"Trying {path.name}.", "tool_calls": [{"name": "write_candidate", "arguments": {"source": path.read_text()}}]}


def kinds(run: Run) -> list[str]:
    return list(run.events.order_by("seq").values_list("kind", flat=True))


def test_the_model_s_mistakes_become_observations_and_the_run_ends_with_a_kept_kernel(owner, problem, fast_eval):
    endpoint = scripted("mistakes", [
        {"text": "Let me think.", "tool_calls": [{"name": "write_candidate", "arguments": "{not json"}]},
        {"text": "", "tool_calls": [{"name": "make_it_fast", "arguments": {}}]},
        {"text": "No tools this time."},
        write(BAD_BUILD_CANDIDATE),
        write(WRONG),
        write(GOOD_CANDIDATE),
        {"text": "Done.", "tool_calls": [{"name": "submit", "arguments": {"candidate": "best"}}]},
    ])
    run = drive(start_agent_run(owner, problem, endpoint, budgets={"turns": 10}))

    assert run.status == Run.Status.FINISHED and run.message.startswith("Submitted"), run.message
    results = list(run.events.filter(kind="tool_result").order_by("seq").values_list("payload", flat=True))
    assert results[0]["error"] and "not valid JSON" in results[0]["content"]
    assert results[1]["error"] and "unknown tool 'make_it_fast'" in results[1]["content"]
    observation = run.events.get(kind="observation").payload
    assert observation["turn"] == 2 and "did not call a tool" in observation["text"]
    assert "build_error" in results[2]["content"] and "build log" in results[2]["content"]
    assert "status: incorrect" in results[3]["content"] or "status: runtime_error" in results[3]["content"]
    assert "status: accepted" in results[4]["content"] and "submitted" in results[5]["content"]
    # Each evaluation is a stored candidate; the accepted one is the run's best and becomes a kernel.
    statuses = list(run.candidates.order_by("turn").values_list("verdict__status", flat=True))
    assert statuses[0] == "build_error" and statuses[2] == "accepted" and len(statuses) == 3
    kernel = Kernel.objects.get()
    assert kernel.candidate == run.best_candidate and kernel.policy == "scripted:mistakes"
    assert run.best_speedup == kernel.speedup_vs_eager > 0
    # The text streamed as batched token events before each turn's assistant message.
    order = kinds(run)
    assert order.index("token") < order.index("assistant") and order[-1] == "run_finished"
    assert "knowledge_recorded" in order
    # Each evaluation's phases arrived as they started, named by the turn that asked for it (progress, not evidence).
    phases = list(run.events.filter(kind="phase").order_by("seq").values_list("payload", flat=True))
    assert {p["phase"] for p in phases} >= {"plan", "build", "reference", "candidate", "check", "timing"}, phases
    assert {4, 5} <= {p["turn"] for p in phases} <= {3, 4, 5} and all(p["what"] and p["elapsed"] >= 0 for p in phases)
    # The training record: the whole conversation, per-turn rewards, the final reward.
    record = run.trajectory
    assert record["turns"] == 7 and record["status"] == "submitted" and record["final_reward"] >= 1
    assert record["turn_rewards"][3:6] == [-1.0, -1.0, record["turn_rewards"][5]] and record["turn_rewards"][5] >= 1
    assert [m["role"] for m in record["messages"]][:3] == ["system", "user", "assistant"]
    seqs = list(run.events.order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))


def test_it_stops_at_the_turn_budget_and_keeps_the_trajectory(owner, problem, fast_eval):
    endpoint = scripted("chatty", [{"text": f"thinking {i}"} for i in range(5)])
    run = drive(start_agent_run(owner, problem, endpoint, budgets={"turns": 2}))
    assert run.status == Run.Status.FINISHED and "turn budget spent (2 of 2 turns)" in run.message
    assert run.trajectory["turns"] == 2 and run.trajectory["final_reward"] == -1.0
    assert not Kernel.objects.exists() and kinds(run).count("assistant") == 2


def test_cancelling_between_a_turn_and_its_tool_calls_answers_them_and_keeps_the_record(owner, problem, fast_eval):
    endpoint = scripted("cut", [write(GOOD_CANDIDATE)])
    run = start_agent_run(owner, problem, endpoint, budgets={"turns": 5})
    assert steps.execute(run.pk, Run.Stage.THINK).retry_in is None
    run.refresh_from_db()
    assert run.stage == Run.Stage.ACT and run.agent_state["pending"]

    assert cancel_run(run)
    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED and run.trajectory["status"] == "cancelled"
    assert run.trajectory["messages"][-1] == {"role": "tool", "tool_call_id": "call_0_0",
                                              "content": "not run: the run was cancelled"}
    # A worker that picks up the queued act step finds the run over and does nothing.
    assert steps.execute(run.pk, Run.Stage.ACT).retry_in is None
    assert not run.candidates.exists() and kinds(run)[-1] == "run_finished"


def test_cancelling_a_run_whose_best_is_slower_than_pytorch_keeps_no_kernel_and_says_why(owner, problem, fast_eval):
    endpoint = scripted("slow", [write(GOOD_CANDIDATE), {"text": "more"}])
    run = start_agent_run(owner, problem, endpoint, budgets={"turns": 5})
    assert steps.execute(run.pk, Run.Stage.THINK).retry_in is None
    assert steps.execute(run.pk, Run.Stage.ACT).retry_in is None
    run.refresh_from_db()
    assert run.best_candidate is not None
    fast_eval.KSTUDIO_LIBRARY_MIN_SPEEDUP = 999.0  # whatever the box measured, slower than the margin
    assert cancel_run(run)
    run.refresh_from_db()
    assert not Kernel.objects.exists() and "kernel_saved" not in kinds(run)
    assert "the library keeps kernels at least 999.00x faster" in run.events.get(kind="kernel_not_kept").payload["reason"]
    assert run.trajectory["kept"] is False
    assert run.knowledge_entries.get().status == "slower_than_pytorch"


def test_an_endpoint_whose_key_is_missing_fails_the_run_saying_which_variable(owner, problem, fast_eval, monkeypatch):
    monkeypatch.delenv("KSTUDIO_TEST_MISSING_KEY", raising=False)
    endpoint = ModelEndpoint.objects.create(name="hosted", kind=ModelEndpoint.Kind.OPENAI, base_url="http://127.0.0.1:9/v1",
                                            model="m", api_key_env="KSTUDIO_TEST_MISSING_KEY")
    run = drive(start_agent_run(owner, problem, endpoint))
    assert run.status == Run.Status.FAILED and "KSTUDIO_TEST_MISSING_KEY" in run.message, run.message


def test_a_dead_endpoint_fails_the_run_with_the_url_it_tried(owner, problem, fast_eval):
    endpoint = ModelEndpoint.objects.create(name="dead", kind=ModelEndpoint.Kind.OPENAI, base_url="http://127.0.0.1:9/v1",
                                            model="m", retries=0, timeout_seconds=2)
    run = drive(start_agent_run(owner, problem, endpoint))
    assert run.status == Run.Status.FAILED and "127.0.0.1:9" in run.message, run.message


def test_a_second_run_on_a_similar_problem_is_offered_what_the_first_learnt(owner, problem, fast_eval):
    first = drive(start_agent_run(owner, problem, scripted("first", [write(WRONG), write(GOOD_CANDIDATE)]), budgets={"turns": 2}))
    assert first.best_candidate is not None, first.message
    titles = first.events.get(kind="knowledge_recorded").payload["titles"]
    assert titles, "the first run recorded knowledge-base entries"

    # Same operations, other sizes: a similar problem, uploaded separately.
    similar = create_problem(owner, "silu_bias_big.py", PROBLEM.read_text().replace("1024", "2048"))
    second = drive(start_agent_run(owner, similar, scripted("second", [{"text": "reading notes"}]), budgets={"turns": 1}))
    started = second.events.get(kind="agent_started").payload
    assert started["knowledge"] and any(title in started["knowledge"] for title in titles)
    first_user_message = second.trajectory["messages"][1]["content"]
    assert "Notes from earlier runs" in first_user_message and started["knowledge"] in first_user_message


@pytest.mark.parametrize("budgets, expect", [({"turns": "many"}, "whole number"), ({"turns": 0}, "at least 1"),
                                             ({"gpu_seconds": -1}, "positive")])
def test_bad_budgets_are_refused_with_the_budget_named(owner, problem, budgets, expect):
    from apps.core.errors import Refused

    endpoint = scripted("b", [{"text": "x"}])
    with pytest.raises(Refused, match=expect):
        start_agent_run(owner, problem, endpoint, budgets=budgets)
    assert not Run.objects.exists()


def test_budgets_above_the_studio_maximum_are_lowered_to_it(owner, problem, settings):
    settings.KSTUDIO_AGENT_MAX_TURNS = 7
    run = start_agent_run(owner, problem, scripted("c", [{"text": "x"}]), budgets={"turns": 1000})
    assert run.budgets["turns"] == 7 and run.budgets["tokens"] == settings.KSTUDIO_AGENT_MAX_TOKENS


def test_model_output_with_nul_characters_is_stored_not_fatal(owner, problem, fast_eval, monkeypatch):
    # Postgres refuses U+0000 in text and jsonb; tiny models emit it (the served model in
    # test_agent_e2e.py did). The run must go on with the character replaced.
    from agent.loop.policies.base import PolicyTurn
    from agent.loop.policies.scripted import ScriptedPolicy, call

    policy = ScriptedPolicy([PolicyTurn("odd \x00 bytes", [call("read_skill", '{"name": "\x00"}')])])
    monkeypatch.setattr("apps.endpoints.policies.policy_for", lambda endpoint, *args, **kwargs: policy)
    run = drive(start_agent_run(owner, problem, scripted("nul", [{"text": "replaced by the policy above"}]), budgets={"turns": 1}))
    assert run.status == Run.Status.FINISHED, run.message
    assistant = run.events.get(kind="assistant").payload
    assert assistant["text"] == "odd \ufffd bytes" and "\x00" not in run.trajectory["messages"][2]["content"]
    assert "unknown skill" in run.events.get(kind="tool_result").payload["content"]


def test_finished_agent_runs_export_as_a_loadable_dataset(owner, problem, fast_eval, tmp_path):
    import datasets
    from django.core.management import CommandError, call_command

    drive(start_agent_run(owner, problem, scripted("one", [write(GOOD_CANDIDATE)]), budgets={"turns": 1}))
    drive(start_agent_run(owner, problem, scripted("two", [{"text": "nothing"}]), budgets={"turns": 1}))
    call_command("export_trajectories", str(tmp_path / "all"))
    rows = datasets.load_from_disk(str(tmp_path / "all"))
    assert rows.num_rows == 2 and sorted(rows["final_reward"])[0] == -1.0
    assert rows[0]["messages"][0]["role"] == "system" and rows[0]["policy"].startswith("scripted:")

    call_command("export_trajectories", str(tmp_path / "good"), "--min-reward", "1")
    assert datasets.load_from_disk(str(tmp_path / "good")).num_rows == 1
    with pytest.raises(CommandError, match="no agent run matches"):
        call_command("export_trajectories", str(tmp_path / "none"), "--owner", "nobody")


def test_a_fresh_studio_optimizes_with_the_built_in_policy_out_of_the_box(owner, problem, fast_eval):
    endpoint = ModelEndpoint.objects.get(kind=ModelEndpoint.Kind.BUILTIN)  # created by a migration
    run = drive(start_agent_run(owner, problem, endpoint, budgets={"turns": 4}))
    assert run.status == Run.Status.FINISHED and run.message.startswith("Submitted"), run.message
    kernel = Kernel.objects.get()
    assert kernel.policy == f"builtin:{endpoint.name}" and kernel.candidate == run.best_candidate
    first = run.events.filter(kind="assistant").order_by("seq").first().payload
    assert first["text"].startswith("Analysis:") and run.events.filter(kind="token").exists()
    assert run.trajectory["policy"] == "builtin" and run.trajectory["final_reward"] >= 1
