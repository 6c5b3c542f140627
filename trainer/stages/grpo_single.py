"""Stage (a): single-turn GRPO warm-up. Each prompt is one problem; each completion should hold a whole candidate
module, which the evaluation engine judges in the sandbox (trainer.rewards.EngineReward): correctness-gated
milestones for being correct, beating eager and beating torch.compile by a margin."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from trl import GRPOTrainer

from trainer.data import Problem, single_turn_dataset
from trainer.rewards import EngineReward
from trainer.stages.common import StageContext, finish, load_tokenizer, quiet
from trainer.stages.grpo import grpo_config

NAME = "grpo_single"


def train(ctx: StageContext, policy: Path, problems: list[Problem]) -> dict[str, Any]:
    started = time.monotonic()
    stage = ctx.config.grpo_single
    progress = ctx.progress(NAME)
    trainer = quiet(GRPOTrainer(model=str(policy), reward_funcs=[EngineReward(ctx.engine)],
                                args=grpo_config(ctx, stage), train_dataset=single_turn_dataset(problems),
                                processing_class=load_tokenizer(policy, "left"), callbacks=[progress]))
    trainer.train()
    return finish(trainer, ctx, progress, started, problems=len(problems))
