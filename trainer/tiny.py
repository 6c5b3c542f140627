"""Random Qwen2 chat models built offline from a config (DESIGN §7): a byte-level BPE tokenizer trained here
on a few KB of text, a chat template with Hermes tool calls, and random weights. Nothing is downloaded.

Two sizes: "tiny" (2 layers of width 64, well under a million parameters) for tests and CPU demos, whose
output is gibberish but whose plumbing is real; "small" (8 layers of width 512, ~30M parameters) to measure
a training step on a GPU without fetching a checkpoint.

    python -m trainer tiny-model OUT_DIR [--size small]
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

SIZES: dict[str, dict[str, int]] = {
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2},
    "small": {"hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 8, "num_attention_heads": 8,
              "num_key_value_heads": 4},
}

# The tokens of the Qwen2.5 conversation and tool-call format.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>"]

# What the tokenizer learns its merges from: kernel talk, Python, JSON tool calls and the agent's own
# prompt words, so the agent's long prompts take fewer tokens.
CORPUS = """\
A kernel reads its inputs from global memory, computes, and writes its outputs. Coalesced loads
let a warp fetch one contiguous segment; shared memory lets a block reuse a tile many times.
The agent writes a candidate, compiles it, checks it against the reference and times it.
You are a performance engineer who writes fast, correct kernels for PyTorch modules. The problem is
a Python module in KernelBench's format: class Model(nn.Module), get_inputs() and get_init_inputs().
Write a candidate module that defines class ModelNew(nn.Module) with the same constructor arguments and
forward signature. Candidates are built, checked against Model on several fresh inputs, then timed
against PyTorch eager and torch.compile. status: accepted incorrect build_error runtime_error rejected
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.weight.t() + self.bias)
def get_inputs():
    return [torch.randn(512, 1024)]
{"type": "function", "function": {"name": "write_candidate", "description": "the verdict", "parameters":
{"type": "object", "properties": {"source": {"type": "string", "description": "the full source"}}, "required": []}}}
{"name": "write_candidate", "arguments": {"source": "import torch"}} benchmark profile read_skill search_knowledge submit
<tool_call> </tool_call> <tool_response> </tool_response>
The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) [ ] { } < > : ; , . ! ?
"""


def qwen2_5_chat_template() -> str:
    """The Qwen2.5 chat template that TRL ships: TRL recognises it, so its trainers parse tool calls from it
    and swap in its training variant (with generation markers) for assistant-only loss."""
    from trl.chat_template_utils import qwen2_5_chat_template as template

    return template


def agent_corpus() -> str:
    """CORPUS plus what the agent's model reads most: its system prompt and the tool schemas."""
    import json

    from agent.loop import system_prompt
    from agent.loop import tool_schemas

    problem = "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    return "\n".join([CORPUS, system_prompt(problem, "cpu", []), system_prompt(problem, "cuda", []),
                      json.dumps(tool_schemas())])


def build(directory: Path | str, *, size: str = "tiny", vocab_size: int = 1024, seed: int = 0,
          chat_template: str | None = None, corpus: str | None = None, max_position_embeddings: int = 8192,
          generation: dict[str, Any] | None = None) -> Path:
    """Write tokenizer (with `chat_template`, by default Qwen2.5's), config, generation config and random
    weights to `directory`. The tokenizer learns from `corpus` (by default agent_corpus()); `generation`
    overrides fields of the generation config. Returns the directory."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; choose one of {', '.join(SIZES)}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([corpus if corpus is not None else agent_corpus()] * 20, trainer=trainer)

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL_TOKENS[1:])
    tokenizer.chat_template = chat_template if chat_template is not None else qwen2_5_chat_template()
    tokenizer.save_pretrained(directory)

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), max_position_embeddings=max_position_embeddings,
                         tie_word_embeddings=True, initializer_range=0.5 if size == "tiny" else 0.02,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None,
                         **SIZES[size])
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(**{"eos_token_id": tokenizer.eos_token_id,
                                                  "pad_token_id": tokenizer.pad_token_id, **(generation or {})})
    model.save_pretrained(directory)
    return directory
