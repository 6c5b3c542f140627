"""The agent's workplace inside a GRPO rollout: the tools TRL offers are the agent's (same names, descriptions,
arguments), and each call runs through the agent's toolbox and loop, turn budget and all."""
from __future__ import annotations

import inspect
import json
from pathlib import Path

from transformers.utils import get_json_schema

from agent.loop.skills import list_skills
from agent.loop.tools import tool_schemas
from trainer.environment import KernelEnvironment, ToolLog
from trainer.rewards import Engine
from tests.trainer.records import ROW_SUM


def offered_tools(environment: KernelEnvironment) -> list:
    """The methods GRPOTrainer offers as tools: public functions of the class but reset and get_reward."""
    return [getattr(environment, name) for name, _ in inspect.getmembers(type(environment), inspect.isfunction)
            if name not in ("reset", "get_reward") and not name.startswith("_")]


def test_it_offers_the_agents_own_tools_with_their_schemas() -> None:
    offered = {s["function"]["name"]: s["function"]
               for s in (get_json_schema(t) for t in offered_tools(KernelEnvironment(lambda d: None, 1)))}
    for schema in tool_schemas():
        agent = schema["function"]
        ours = offered[agent["name"]]
        assert ours["description"] == agent["description"]
        assert ours["parameters"]["properties"] == agent["parameters"]["properties"]
        assert ours["parameters"].get("required", []) == agent["parameters"]["required"]
    assert set(offered) == {s["function"]["name"] for s in tool_schemas()}


def test_it_runs_calls_through_the_agent_loop_within_its_turn_budget(engine: Engine, tmp_path: Path) -> None:
    log = ToolLog(tmp_path / "tools.jsonl")
    environment = KernelEnvironment(engine.toolbox, max_turns=2, tool_log=log)
    environment.reset(problem_source=ROW_SUM, device="cpu", prompt=[], name="row_sum")
    skill = list_skills()[0]
    assert environment.read_skill(skill).strip()  # the skill document itself
    assert environment.submit("best").startswith("error: refused: no candidate has been accepted yet")
    assert environment.write_candidate("class ModelNew: pass").startswith("not run: the run is over (turn budget spent")
    assert environment.state.turn == 2 and environment.state.turns[1].errors == 1
    assert environment.get_reward() == -1.0
    entries = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [e["tool"] for e in entries] == ["read_skill", "submit", "write_candidate"]
    assert json.loads(entries[0]["arguments"]) == {"name": skill}
    # A new rollout starts from a clean run.
    environment.reset(problem_source=ROW_SUM, device="cpu")
    assert environment.state.turn == 0 and environment.state.status == "running"
