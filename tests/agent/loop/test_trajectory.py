import json

from agent.loop.runner import AgentState, TurnRecord
from agent.loop.trajectory import final_reward, to_record


def _state(best=None) -> AgentState:
    state = AgentState(problem_source="p", device="cpu", messages=[{"role": "system", "content": "s"}],
                       tools=[{"type": "function", "function": {"name": "submit"}}], policy="scripted", turn=2)
    state.turns = [TurnRecord(0, ["write_candidate"], [{"status": "incorrect"}], -1.0, 10, 5, 1.0),
                   TurnRecord(1, ["write_candidate"], [{"status": "accepted"}], 2.0, 20, 5, 1.0)]
    state.best = best
    return state


def test_it_records_per_turn_and_final_rewards():
    best = {"turn": 1, "source": "class ModelNew: ...", "verdict": {},
            "summary": {"status": "accepted", "speedup_vs_eager": 1.5, "speedup_vs_compile": None}}
    record = to_record(_state(best))
    assert record["turn_rewards"] == [-1.0, 2.0] and record["final_reward"] == 2.0
    assert record["best_speedup_vs_eager"] == 1.5 and record["policy"] == "scripted"
    assert record["tools"][0]["function"]["name"] == "submit"
    json.dumps(record)


def test_it_gives_a_run_without_an_accepted_candidate_the_failing_reward():
    assert final_reward(_state()) == -1.0
    assert to_record(_state())["best_source"] is None
