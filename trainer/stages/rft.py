"""Stage (b): rejection fine-tuning. SFT with TRL's SFTTrainer on the trajectories that passed the filters
(trainer.data.rft_dataset): tool-calling conversations (`messages` with `tool_calls`, `tools`), loss on the
assistant's tokens only (its text and tool calls, not the prompts or the tool results), which TRL gets from
the chat template's generation markers (it swaps in the training variant of known templates such as Qwen2.5's)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from trainer.data import FilterReport
from trainer.metrics import StageProgress
from trainer.stages.common import StageContext, StageError, finish, load_tokenizer, quiet, training_arguments

NAME = "rft"


def build_trainer(ctx: StageContext, policy: Path, dataset: Dataset, progress: StageProgress) -> SFTTrainer:
    stage = ctx.config.rft
    args = SFTConfig(**training_arguments(ctx, stage), model_init_kwargs={"dtype": ctx.dtype},
                     max_length=stage.max_length, assistant_only_loss=True, packing=False)
    try:
        trainer = SFTTrainer(model=str(policy), args=args, train_dataset=dataset,
                             processing_class=load_tokenizer(policy, "right"), callbacks=[progress])
    except ValueError as exc:
        if "chat template" in str(exc).lower():
            raise StageError(f"rejection fine-tuning needs a chat template whose assistant turns TRL can mask: "
                             f"{exc}") from None
        raise
    return quiet(trainer)


def train(ctx: StageContext, policy: Path, dataset: Dataset, report: FilterReport) -> dict[str, Any]:
    started = time.monotonic()
    progress = ctx.progress(NAME)
    trainer = build_trainer(ctx, policy, dataset, progress)
    trainer.train()
    return finish(trainer, ctx, progress, started, filters=report.to_dict())
