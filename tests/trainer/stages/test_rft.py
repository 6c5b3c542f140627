"""Stage (b): rejection fine-tuning trains on the kept tool-calling conversations, on the assistant's tokens only."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from trainer.config import DataConfig
from trainer.data import load_inputs, rft_dataset
from trainer.rewards import Engine
from trainer.stages import rft
from tests.trainer.conftest import context, tiny_config, weight
from tests.trainer.records import CANDIDATE, failed, good, write_data


def test_it_trains_on_the_successful_trajectories(tiny_model: Path, engine: Engine, tmp_path: Path) -> None:
    inputs = load_inputs(write_data(tmp_path / "data", [good(), good(1.1), failed()]))
    dataset, report = rft_dataset(inputs.trajectories, DataConfig(min_speedup=1.0))
    summary = rft.train(context(tiny_config(tiny_model), engine, tmp_path, "2-rft"), tiny_model, dataset, report)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(line["stage"], line["step"]) for line in lines] == [("rft", 1), ("rft", 2)]
    assert all(line["loss"] > 0 for line in lines) and all(line["reward"] is None for line in lines)
    assert summary["filters"] == {"total": 3, "dropped": {"not correct": 1, "too slow": 0, "too many turns": 0,
                                                          "malformed tool calls": 0, "loops": 0}, "kept": 2}
    assert not torch.equal(weight(tiny_model), weight(summary["policy"]))


def test_it_takes_the_loss_on_the_assistants_turns_only(tiny_model: Path, engine: Engine, tmp_path: Path) -> None:
    inputs = load_inputs(write_data(tmp_path / "data", [good()]))
    dataset, _ = rft_dataset(inputs.trajectories, DataConfig())
    ctx = context(tiny_config(tiny_model), engine, tmp_path, "2-rft")
    trainer = rft.build_trainer(ctx, tiny_model, dataset, ctx.progress("rft"))
    row = trainer.train_dataset[0]  # what the loss sees: labels are -100 where a token is not trained on
    decode = trainer.processing_class.decode
    trained = decode([t for t, label in zip(row["input_ids"], row["labels"]) if label != -100])
    untrained = decode([t for t, label in zip(row["input_ids"], row["labels"]) if label == -100])
    # The model learns its own words and tool calls (and to end its turn)...
    assert "Turn 0." in trained and '"name": "write_candidate"' in trained and json.dumps(CANDIDATE) in trained
    assert '"name": "submit"' in trained and "<|im_end|>" in trained
    # ...not the prompt, the tool schemas or the tool results.
    assert "performance engineer" in untrained and "<tool_response>" in untrained
    assert "status: accepted" in untrained and "status: accepted" not in trained
