"""What every stage shares: where it runs, its training arguments, the checkpoint it reads and the one it writes."""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PrinterCallback

from trainer.config import OptimizationConfig, PipelineConfig
from trainer.metrics import MetricsLog, StageProgress
from trainer.rewards import Engine


class StageError(RuntimeError):
    """A stage cannot run with what it was given; the message says what to change."""


@dataclass
class StageContext:
    config: PipelineConfig
    device: str
    """cpu or cuda (config.device with auto resolved)."""
    metrics: MetricsLog
    engine: Engine
    stage_dir: Path

    @property
    def dtype(self) -> torch.dtype:
        if self.config.dtype == "auto":
            return torch.bfloat16 if self.device == "cuda" else torch.float32
        return getattr(torch, self.config.dtype)

    def progress(self, stage: str, **kwargs: Any) -> StageProgress:
        return StageProgress(stage, self.metrics, self.device, **kwargs)


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise StageError("device is cuda but this machine has no usable CUDA GPU (torch.cuda.is_available() is "
                         "False); set device: cpu, or run on a GPU host with a CUDA build of torch")
    return device


def training_arguments(ctx: StageContext, stage: OptimizationConfig) -> dict[str, Any]:
    """The transformers TrainingArguments every stage's TRL config takes, from the stage's settings."""
    return {
        "output_dir": str(ctx.stage_dir / "trainer"),
        "learning_rate": stage.learning_rate,
        "max_steps": stage.max_steps,
        "num_train_epochs": stage.epochs,
        "per_device_train_batch_size": stage.batch_size,
        "gradient_accumulation_steps": stage.gradient_accumulation_steps,
        "warmup_steps": stage.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        "weight_decay": stage.weight_decay,
        "logging_steps": ctx.config.logging_steps,
        "seed": ctx.config.seed,
        "use_cpu": ctx.device == "cpu",
        "bf16": ctx.dtype == torch.bfloat16,
        "activation_checkpointing": ctx.config.gradient_checkpointing,
        # The pipeline saves each stage's policy once, at its end; intermediate checkpoints cost disk and time.
        "save_strategy": "no",
        "report_to": "none",
        "disable_tqdm": True,  # StageProgress prints one line per step instead
        "dataloader_num_workers": 0,
    }


def load_tokenizer(policy: Path, padding_side: str) -> PreTrainedTokenizerBase:
    tokenizer = AutoTokenizer.from_pretrained(policy, local_files_only=True, padding_side=padding_side)
    if not tokenizer.chat_template:
        raise StageError(f"the tokenizer of {policy} has no chat template; train from a chat/instruct checkpoint "
                         f"(its template renders the tool calls)")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def quiet(trainer: Any) -> Any:
    """Drop transformers' printer of raw log dicts: StageProgress already reports every step."""
    trainer.remove_callback(PrinterCallback)
    return trainer


def finish(trainer: Any, ctx: StageContext, progress: StageProgress, started: float, save_as: str = "policy",
           **summary: Any) -> dict[str, Any]:
    """Save the trained model (with its tokenizer and chat template) as stage_dir/`save_as` and summarise the
    stage; the summary names the saved directory under the key `save_as`."""
    saved = ctx.stage_dir / save_as
    trainer.save_model(str(saved))
    trainer.accelerator.wait_for_everyone()  # the next stage loads it in every process
    steps = trainer.state.global_step
    result = {save_as: str(saved.resolve()), "steps": steps, "seconds": round(time.monotonic() - started, 3),
              "train_loss": progress.summary.get("train_loss"),
              "mean_step_seconds": (sum(progress.step_seconds) / len(progress.step_seconds)
                                    if progress.step_seconds else None),
              **summary}
    return result


def release_memory() -> None:
    """Free what a finished stage's models held before the next stage loads its own."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
