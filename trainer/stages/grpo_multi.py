"""Stage (d): multi-turn agentic GRPO. Each rollout is a run of the agent on one problem: the prompt is the
agent's own opening, the model calls the agent's real tools (trainer.environment.KernelEnvironment through
TRL's environment_factory) which build, check and time its kernels in the sandbox, and TRL masks the tool
results out of the loss. The reward is the run's outcome (the environment's get_reward), plus the critic's
prediction (weighted by critic_weight) where a critic exists."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from trl import GRPOTrainer

from trainer.data import Inputs, multi_turn_dataset
from trainer.environment import KernelEnvironment, ToolLog
from trainer.stages.common import StageContext, finish, load_tokenizer, quiet
from trainer.stages.critic import CriticReward
from trainer.stages.grpo import grpo_config

NAME = "grpo_multi"
TOOL_LOG = "tool_calls.jsonl"


def train(ctx: StageContext, policy: Path, inputs: Inputs, critic: Path | None) -> dict[str, Any]:
    started = time.monotonic()
    stage = ctx.config.grpo_multi
    dataset = multi_turn_dataset(inputs)
    ctx.stage_dir.mkdir(parents=True, exist_ok=True)
    tool_log = ToolLog(ctx.stage_dir / TOOL_LOG)
    progress = ctx.progress(NAME, tool_log=tool_log)
    rewards: list[Any] = []
    if critic is not None and stage.critic_weight > 0:
        rewards.append(CriticReward(critic, ctx.device, ctx.config.critic.max_length))
    args = grpo_config(ctx, stage, max_tool_calling_iterations=stage.max_tool_calls,
                       # The environment's own reward (the run's outcome) is appended by TRL with weight 1.
                       reward_weights=[stage.critic_weight] if rewards else None)
    trainer = GRPOTrainer(model=str(policy), reward_funcs=rewards or None, args=args, train_dataset=dataset,
                          processing_class=load_tokenizer(policy, "left"), callbacks=[progress],
                          environment_factory=lambda: KernelEnvironment(ctx.engine.toolbox, stage.max_turns, tool_log))
    quiet(trainer).train()
    return finish(trainer, ctx, progress, started, problems=len(dataset), critic=str(critic) if rewards else None,
                  tool_calls=str(tool_log.path.resolve()))
