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
    """Write tokenizer, config, generation config and random weights to `directory` (trainer.tiny builds them;
    this keeps the template and corpus these tests were written against)."""
    from trainer.tiny import build as build_model

    # min_new_tokens: a random model may otherwise end on its first token, and the tests need a
    # stream of several chunks.
    return build_model(directory, size="tiny", vocab_size=vocab_size, seed=seed, chat_template=CHAT_TEMPLATE,
                       corpus=_CORPUS, max_position_embeddings=4096,
                       generation={"min_new_tokens": 8, "max_new_tokens": 32, "do_sample": True, "temperature": 1.0})


if __name__ == "__main__":
    import sys
    print(build(Path(sys.argv[1])))
