"""Stage (d): multi-turn GRPO whose rollouts call the agent's real tools on a CPU problem (the engine judges
the kernel the model wrote), with the tool results masked out of the loss and the critic shaping the reward."""
from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import AutoTokenizer
from transformers.utils import get_json_schema
from trl import GRPOTrainer

from agent.loop.policies.transformers_local import TransformersPolicy
from trainer.data import load_inputs, multi_turn_dataset
from trainer.environment import KernelEnvironment
from trainer.rewards import Engine
from trainer.stages import grpo_multi
from tests.trainer.conftest import context, tiny_config, weight
from tests.trainer.priming import prime
from tests.trainer.records import ROW_SUM, write_data

WRONG = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(x.shape[0])\n"
CALL = '<tool_call>\n' + json.dumps({"name": "write_candidate", "arguments": {"source": WRONG}}) + '\n</tool_call>'


def test_it_trains_on_rollouts_that_call_the_agents_tools(tiny_model: Path, engine: Engine, tmp_path: Path,
                                                          trained_critic: dict[str, Any],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = load_inputs(write_data(tmp_path / "data", [], [("row_sum", ROW_SUM)]))
    # A low temperature: the primed model then writes its call verbatim (20 of 20 samples at 0.3 when measured).
    config = tiny_config(tiny_model, grpo_multi={"temperature": 0.2})

    # A random model never calls a tool: teach a copy to open with a write_candidate call for this prompt, rendered
    # with the tools exactly as GRPOTrainer renders it.
    policy = Path(shutil.copytree(tiny_model, tmp_path / "primed"))
    environment = KernelEnvironment(engine.toolbox, 2)
    tools = [getattr(environment, name) for name, _ in inspect.getmembers(KernelEnvironment, inspect.isfunction)
             if name not in ("reset", "get_reward") and not name.startswith("_")]
    assert prime(policy, multi_turn_dataset(inputs)[0]["prompt"], tools, CALL, target_loss=0.01) < 0.01

    batches: list[dict[str, Any]] = []
    original = GRPOTrainer._generate_and_score_completions

    def spy(self: GRPOTrainer, batch: Any) -> dict[str, Any]:  # records what the loss is computed on
        output = original(self, batch)
        batches.append(output)
        return output

    monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", spy)
    summary = grpo_multi.train(context(config, engine, tmp_path, "4-grpo_multi"), policy, inputs,
                               Path(trained_critic["critic"]))

    # The rollouts ran the model's kernel through the real engine and read its verdict.
    calls = [json.loads(line) for line in Path(summary["tool_calls"]).read_text().splitlines()]
    written = [c for c in calls if c["tool"] == "write_candidate"]
    assert written and all(c["status"] == "incorrect" for c in written)
    assert all(c["observation"].startswith("status: incorrect (reached stage") for c in written)
    assert json.loads(written[0]["arguments"]) == {"source": WRONG}

    # The loss saw the model's tool call but not the tool's answer.
    output = batches[0]
    tokenizer = AutoTokenizer.from_pretrained(policy)
    masks = output["completion_mask"] * (1 - output["tool_mask"])  # 1 on tool-result tokens
    rollout = int(masks.sum(dim=1).argmax())  # a rollout that called a tool
    ids, mask = output["completion_ids"][rollout], output["completion_mask"][rollout]
    tool_mask = output["tool_mask"][rollout]
    trained = tokenizer.decode(ids[(mask * tool_mask).bool()])
    masked = tokenizer.decode(ids[(mask * (1 - tool_mask)).bool()])
    assert trained.startswith(CALL + "<|im_end|>") and '"name": "write_candidate"' not in masked
    assert "<tool_response>\nstatus: incorrect (reached stage" in masked

    line = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert line["stage"] == "grpo_multi" and line["step"] == 1 and isinstance(line["loss"], float)
    assert line["rewards/KernelEnvironment/mean"] == -1.0  # the run's outcome: no accepted kernel
    assert line["rewards/critic/mean"] is not None and line["tools/call_frequency"] > 0
    assert summary["critic"] == trained_critic["critic"]
    assert not torch.equal(weight(policy), weight(summary["policy"]))

    # The agent loads the trained policy and parses the tool call it still opens with.
    agent = TransformersPolicy(summary["policy"], temperature=0, max_new_tokens=len(CALL))
    turn = agent.respond(multi_turn_dataset(inputs)[0]["prompt"], [get_json_schema(t) for t in tools])
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [("write_candidate", {"source": WRONG})]
