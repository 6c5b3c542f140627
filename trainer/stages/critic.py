"""Stage (c): critic pre-training, and the critic's use in stage (d).

The critic is a value model: the policy's transformer with a one-output head (AutoModelForSequenceClassification,
num_labels=1), reading a whole trajectory as the chat template renders it and predicting its outcome (the
run's final reward, -1 to 3). Trained as a regression (mean squared error) with transformers' Trainer, the
base class of TRL's trainers (same arguments, callbacks and accelerate/DeepSpeed launch). Not TRL's
RewardTrainer: that one learns from preference pairs (chosen vs rejected, a Bradley-Terry loss), while our
targets are absolute outcomes on a fixed scale, which a regression fits directly.

In stage (d), CriticReward adds the critic's prediction for each finished rollout to its reward (weighted by
grpo_multi.critic_weight): a dense signal between the engine's few discrete milestones.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding,
                          PreTrainedTokenizerBase, Trainer, TrainingArguments)

from trainer.data import critic_dataset
from trainer.stages.common import StageContext, StageError, finish, load_tokenizer, quiet, training_arguments

NAME = "critic"


def render_conversation(tokenizer: PreTrainedTokenizerBase) -> Callable[[list[dict[str, Any]]], str]:
    """The text the critic reads for a conversation: the chat template's rendering (without the tool schemas,
    which are the same for every run), as GRPOTrainer renders a rollout for a reward model."""
    return lambda messages: tokenizer.apply_chat_template(messages, tokenize=False)


def train(ctx: StageContext, policy: Path, trajectories: Dataset) -> dict[str, Any]:
    started = time.monotonic()
    stage = ctx.config.critic
    tokenizer = load_tokenizer(policy, "right")
    tokenizer.truncation_side = "left"  # a long trajectory keeps its end, where its outcome shows
    dataset = critic_dataset(trajectories, render_conversation(tokenizer), ctx.config.data)
    if len(dataset) == 0:
        raise StageError("the critic has no trajectories to learn from (all longer than data.max_turns); raise "
                         "data.max_turns or export more runs")
    model = AutoModelForSequenceClassification.from_pretrained(policy, num_labels=1, problem_type="regression",
                                                               dtype=ctx.dtype, local_files_only=True)
    model.config.pad_token_id = tokenizer.pad_token_id  # the head reads the last token that is not padding

    def tokenize(batch: dict[str, list[Any]]) -> dict[str, Any]:
        encoded = tokenizer(batch["text"], truncation=True, max_length=stage.max_length)
        return {**encoded, "labels": [float(t) for t in batch["target"]]}

    tokenized = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names)
    progress = ctx.progress(NAME)
    trainer = Trainer(model=model, args=TrainingArguments(**training_arguments(ctx, stage)), train_dataset=tokenized,
                      data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer,
                      callbacks=[progress])
    quiet(trainer).train()
    targets = dataset["target"]
    summary = finish(trainer, ctx, progress, started, save_as="critic", trajectories=len(dataset),
                     target_mean=sum(targets) / len(targets))
    # The critic does not change the policy: the next stage starts from the one this stage was given.
    return {"policy": str(Path(policy).resolve()), **summary}


class CriticReward:
    """A GRPO reward function: the critic's predicted outcome of each rollout (prompt and completion rendered
    like the critic's training text, cut to its last `max_length` tokens)."""

    __name__ = "critic"  # TRL names the reward's log column after it

    def __init__(self, path: Path | str, device: str, max_length: int) -> None:
        path = Path(path)
        if not (path / "config.json").is_file():
            raise StageError(f"no critic checkpoint at {path}; run the critic stage first, or set "
                             f"grpo_multi.critic_path to one (or critic_weight: 0 to train without a critic)")
        self.device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if device == "cuda" else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, truncation_side="left")
        self.model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).to(self.device)
        self.model.eval()
        self.render = render_conversation(self.tokenizer)
        self.max_length = max_length

    def __call__(self, prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        values = []
        with torch.inference_mode():
            for prompt, completion in zip(prompts, completions, strict=True):
                # One at a time: rollouts differ widely in length, and padding a batch to the longest wastes more
                # than the batching saves.
                text = self.render(list(prompt) + list(completion))
                inputs = self.tokenizer(text, truncation=True, max_length=self.max_length, return_tensors="pt")
                values.append(float(self.model(**inputs.to(self.device)).logits[0, 0]))
        return values
