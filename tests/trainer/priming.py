"""Teaches a tiny random model one answer, so that a test can watch what the trainer does with it.

A random model writes gibberish and never calls a tool; the multi-turn stage's test needs rollouts that do.
A few hundred steps of plain next-token training on one (prompt, answer) pair make the model answer that
prompt with that text (a tool call) when sampled at a low temperature."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def prime(model_dir: Path, messages: list[dict[str, Any]], tools: list[Any], answer: str, steps: int = 200,
          learning_rate: float = 1e-2, target_loss: float = 5e-3) -> float:
    """Train the checkpoint in `model_dir` (in place) to answer `messages` (rendered with `tools`, as TRL
    renders its prompts) with `answer` followed by the end-of-turn token, until the loss per token is under
    `target_loss` or after `steps` steps. Returns the final loss."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True, dtype=torch.float32)
    prompt = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    input_ids = torch.tensor([prompt_ids + answer_ids])
    labels = torch.tensor([[-100] * len(prompt_ids) + answer_ids])
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    model.train()
    loss = torch.tensor(float("inf"))
    for _ in range(steps):
        loss = model(input_ids=input_ids, labels=labels).loss
        if loss.item() < target_loss:
            break
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(model_dir)
    return loss.item()
