"""A tiny random Qwen2 chat model built offline for serving tests (DESIGN §7): a byte-level BPE
tokenizer trained here on a few KB of text, a Qwen2.5-style chat template with Hermes tool calls,
and a 2-layer model from a config. Nothing is downloaded; the weights are random, so the output is
gibberish, which is all the client tests need."""
from __future__ import annotations

from pathlib import Path

# The Qwen2.5 conversation format, written for these tests: <|im_start|>role ... <|im_end|>, tools
# listed as JSON inside <tools></tools> in the system turn, calls and results wrapped in
# <tool_call> and <tool_response> tags (the "hermes" format vLLM and `transformers serve` parse).
CHAT_TEMPLATE = r"""
{%- set default_system = "You are a helpful assistant." -%}
{%- if messages and messages[0].role == "system" -%}
  {%- set system = messages[0].content -%}{%- set rest = messages[1:] -%}
{%- else -%}
  {%- set system = default_system -%}{%- set rest = messages -%}
{%- endif -%}
{{- "<|im_start|>system\n" + system -}}
{%- if tools -%}
  {{- "\n\n# Tools\n\nYou may call one or more functions. Their signatures are inside <tools></tools>:\n<tools>" -}}
  {%- for tool in tools -%}{{- "\n" + (tool | tojson) -}}{%- endfor -%}
  {{- "\n</tools>\n\nFor each call, write a JSON object with the function's name and arguments inside <tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" -}}
{%- endif -%}
{{- "<|im_end|>\n" -}}
{%- for message in rest -%}
  {%- if message.role == "assistant" -%}
    {{- "<|im_start|>assistant\n" + (message.content or "") -}}
    {%- for call in (message.tool_calls or []) -%}
      {%- set fn = call.function if call.function is defined else call -%}
      {%- set args = fn.arguments if fn.arguments is string else (fn.arguments | tojson) -%}
      {{- "\n<tool_call>\n{\"name\": \"" + fn.name + "\", \"arguments\": " + args + "}\n</tool_call>" -}}
    {%- endfor -%}
    {{- "<|im_end|>\n" -}}
  {%- elif message.role == "tool" -%}
    {{- "<|im_start|>user\n<tool_response>\n" + message.content + "\n</tool_response><|im_end|>\n" -}}
  {%- else -%}
    {{- "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n" -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- "<|im_start|>assistant\n" -}}{%- endif -%}
"""

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
                  "<tool_response>", "</tool_response>"]

_CORPUS = """\
A kernel reads its inputs from global memory, computes, and writes its outputs. Coalesced loads
let a warp fetch one contiguous segment; shared memory lets a block reuse a tile many times.
The agent writes a candidate, compiles it, checks it against the reference and times it.
def forward(self, x):
    return torch.relu(x @ self.weight.t() + self.bias)
{"name": "write_candidate", "arguments": {"source": "import torch"}}
<tool_call> </tool_call> <tool_response> </tool_response>
The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) [ ] { } < > : ; , . ! ?
"""


def build(directory: Path, *, vocab_size: int = 512, seed: int = 0) -> Path:
    """Write tokenizer, config, generation config and random weights to `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    directory.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([_CORPUS] * 20, trainer=trainer)

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL_TOKENS[1:])
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)

    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         tie_word_embeddings=True, initializer_range=0.5, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    model = Qwen2ForCausalLM(config)
    # min_new_tokens: a random model may otherwise end on its first token, and the tests need a
    # stream of several chunks.
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                                               min_new_tokens=8, max_new_tokens=32, do_sample=True, temperature=1.0)
    model.save_pretrained(directory)
    return directory


if __name__ == "__main__":
    import sys
    print(build(Path(sys.argv[1])))
