"""A policy that runs a local transformers checkpoint in this process (DESIGN §7): a model the trainer
produced, or a small one for offline work. No server: the chat template renders the prompt, generate()
streams the completion, and the tool calls are parsed out of its text.

Tool calls are parsed by the tokenizer's own response parser where the checkpoint ships one
(`response_template`, transformers' maintained format-aware parser); otherwise, or where that parser
refuses a malformed call, by the small Hermes parser below: the `<tool_call>{"name", "arguments"}
</tool_call>` format of the Qwen family (what vLLM's `--tool-call-parser hermes` reads).
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from jinja2 import TemplateError
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, TextIteratorStreamer

from agent.loop.policies.base import PolicyError, PolicyTurn, ToolCall

# A call runs from its opening tag to its closing tag, or to the end of the completion when generation
# stopped inside it (the model still meant to call a tool; the loop tells it what went wrong).
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
# The tool's name in a call whose JSON does not parse, so the observation can name the tool.
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')


class TransformersPolicy:
    """Generates one assistant turn per `respond` call with a causal LM loaded from `model_path`.

    model_path: a checkpoint directory (config.json, weights, a tokenizer with a chat template).
    device: where the model runs ("cpu", "cuda", "cuda:1").
    temperature: 0 decodes greedily; above 0 samples, with nucleus `top_p`.
    max_new_tokens: the longest completion of one turn.
    seed: makes sampling reproducible; each turn seeds torch's global generator with seed + its index,
      so a resumed run draws what an uninterrupted one would have.
    The weights load on the first `respond` (or `load`), not here; the path is checked here.
    """

    def __init__(self, model_path: str | Path, device: str = "cpu", temperature: float = 0.2, top_p: float = 0.95,
                 max_new_tokens: int = 4096, seed: int | None = None) -> None:
        if temperature < 0 or not 0 < top_p <= 1 or max_new_tokens < 1:
            raise ValueError("TransformersPolicy needs temperature >= 0, 0 < top_p <= 1 and max_new_tokens >= 1")
        self.model_path = Path(model_path)
        if not self.model_path.is_dir():
            raise PolicyError(f"no model directory at {self.model_path}; pass the directory of a transformers "
                              f"checkpoint (config.json, weights, tokenizer), e.g. the trainer's output_dir")
        if not (self.model_path / "config.json").is_file():
            raise PolicyError(f"{self.model_path} holds no config.json, so it is not a transformers checkpoint; "
                              f"pass the directory save_pretrained() wrote")
        self.name = f"transformers:{self.model_path.resolve().name}"
        self.device = device
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self._tokenizer: Any = None
        self._model: PreTrainedModel | None = None
        self._stop_ids: frozenset[int] = frozenset()

    def load(self) -> None:
        """Load tokenizer and weights (once). Raises PolicyError for a checkpoint we cannot use."""
        if self._model is not None:
            return
        # local_files_only: a missing file must fail here, never start a download.
        try:
            tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise PolicyError(f"cannot load the tokenizer of {self.model_path}: {exc}; the directory needs the "
                              f"tokenizer files save_pretrained() writes") from None
        if not tokenizer.chat_template:
            raise PolicyError(f"the tokenizer of {self.model_path} has no chat template, so a conversation cannot be "
                              f"rendered; use an instruct/chat checkpoint or save one with a chat_template")
        # Full precision on the CPU (half-precision matmuls are slow or missing there); the checkpoint's own
        # dtype on a GPU.
        dtype = torch.float32 if self.device == "cpu" else "auto"
        try:
            model = AutoModelForCausalLM.from_pretrained(self.model_path, local_files_only=True, dtype=dtype)
        except ValueError as exc:
            raise PolicyError(f"{self.model_path} is not a causal language model transformers can load ({exc}); "
                              f"pass a text-generation checkpoint") from None
        except OSError as exc:
            raise PolicyError(f"cannot load the weights of {self.model_path}: {exc}") from None
        try:
            model.to(self.device)
        except (RuntimeError, AssertionError) as exc:  # no such device; torch without CUDA asserts
            raise PolicyError(f"cannot put the model on device {self.device!r}: {exc}; pick a device this machine "
                              f"has (cpu, cuda)") from None
        model.eval()
        eos = model.generation_config.eos_token_id
        stop = set(eos if isinstance(eos, list) else [eos]) | {tokenizer.eos_token_id}
        self._tokenizer, self._model, self._stop_ids = tokenizer, model, frozenset(s for s in stop if s is not None)

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                on_text: Callable[[str], None] | None = None) -> PolicyTurn:
        self.load()
        tokenizer, model = self._tokenizer, self._model
        assert model is not None
        try:
            prompt = tokenizer.apply_chat_template(template_messages(messages), tools=tools or None,
                                                   add_generation_prompt=True, tokenize=False)
        except TemplateError as exc:  # a template may refuse a conversation (raise_exception), e.g. role order
            raise PolicyError(f"the chat template of {self.model_path} refused the conversation: {exc}") from None
        inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(model.device)
        turn_index = sum(1 for m in messages if m["role"] == "assistant")
        if self.seed is not None:
            torch.manual_seed(self.seed + turn_index)
        sampling = {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p} if self.temperature > 0 \
            else {"do_sample": False}
        completion, completion_ids = self._generate(inputs, sampling, on_text)

        text, calls = parse_completion(tokenizer, completion, prompt, tools, f"call_{turn_index}")
        ended = bool(completion_ids) and completion_ids[-1] in self._stop_ids
        finish_reason = ("tool_calls" if calls else "stop") if ended else "length"
        return PolicyTurn(text=text, tool_calls=calls, prompt_tokens=int(inputs["input_ids"].shape[1]),
                          completion_tokens=len(completion_ids), finish_reason=finish_reason)

    def close(self) -> None:
        """Nothing to release early: the weights go with the policy."""

    def _generate(self, inputs: Any, sampling: dict[str, Any],
                  on_text: Callable[[str], None] | None) -> tuple[str, list[int]]:
        """Run generate() in a thread and hand its text to `on_text` as it comes. Returns the completion's
        text (what `on_text` received, joined) and its token ids (the end-of-turn token included)."""
        assert self._model is not None
        streamer = _TurnStreamer(self._tokenizer, self._stop_ids)
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["ids"] = self._model.generate(**inputs, streamer=streamer, max_new_tokens=self.max_new_tokens,
                                                      pad_token_id=self._tokenizer.pad_token_id, **sampling)
            except Exception as exc:  # re-raised in the caller's thread, below
                outcome["error"] = exc
                streamer.end()  # unblocks the loop that reads the stream

        thread = threading.Thread(target=work, name="transformers-generate", daemon=True)
        thread.start()
        chunks: list[str] = []
        try:
            for chunk in streamer:
                if chunk:
                    chunks.append(chunk)
                    if on_text is not None:
                        on_text(chunk)
        finally:
            thread.join()
        error = outcome.get("error")
        if isinstance(error, RuntimeError):  # out of memory, a device fault: the run cannot go on
            raise PolicyError(f"generation failed on {self.device}: {error}") from None
        if error is not None:
            raise error
        ids = outcome["ids"][0, inputs["input_ids"].shape[1]:].tolist()
        return "".join(chunks), ids


class _TurnStreamer(TextIteratorStreamer):
    """Streams the completion's text, special tokens included (a checkpoint may mark `<tool_call>` as
    special, and the parser needs it), except the tokens that end the turn: those are markup, not text."""

    def __init__(self, tokenizer: Any, stop_ids: frozenset[int]) -> None:
        super().__init__(tokenizer, skip_prompt=True, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        self.stop_ids = stop_ids

    def put(self, value: torch.Tensor) -> None:
        if self.next_tokens_are_prompt:  # the prompt: the parent skips it
            super().put(value)
            return
        kept = [t for t in value.flatten().tolist() if t not in self.stop_ids]
        if kept:
            super().put(torch.tensor(kept))


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as chat templates expect it. Our messages carry tool-call arguments as JSON text
    (the OpenAI format); Qwen's templates write them with `tojson`, which would quote that text again, so
    arguments that are a JSON object become that object. Text that does not parse stays as written: the
    model sees its own mistake."""
    rendered = []
    for message in messages:
        if message.get("tool_calls"):
            message = {**message, "tool_calls": [_template_call(c) for c in message["tool_calls"]]}
        rendered.append(message)
    return rendered


def _template_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call["function"]
    arguments = function["arguments"]
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            arguments = parsed
    return {**call, "function": {**function, "arguments": arguments}}


def parse_completion(tokenizer: Any, completion: str, prompt: str, tools: list[dict[str, Any]],
                     id_prefix: str) -> tuple[str, list[ToolCall]]:
    """The turn's text and tool calls. The checkpoint's own response parser where it ships one and it
    accepts the completion; the Hermes parser otherwise (the transformers parser refuses a call whose JSON
    is malformed, and that call must reach the loop so the model learns of its mistake)."""
    if tokenizer.response_template is not None:
        try:
            message = tokenizer.parse_response(completion, prefix=prompt, tools=tools or None)
        except ValueError:
            return parse_hermes(completion, id_prefix)
        calls = []
        for i, call in enumerate(message.get("tool_calls") or []):
            function = call["function"]
            arguments = function.get("arguments", {})
            calls.append(ToolCall(id=f"{id_prefix}_{i}", name=str(function.get("name", "")),
                                  arguments=arguments if isinstance(arguments, str) else json.dumps(arguments)))
        return message.get("content") or "", calls
    return parse_hermes(completion, id_prefix)


def parse_hermes(completion: str, id_prefix: str = "call") -> tuple[str, list[ToolCall]]:
    """Split a Hermes-format completion into its text and its tool calls.

    Each `<tool_call>...</tool_call>` holds {"name": ..., "arguments": {...}}. A call whose JSON does not
    parse (or is not such an object) is kept, with arguments = its raw text and the name read off it where
    possible, so the loop reports the mistake to the model. The text is what lies outside the calls, each
    piece stripped of the blank space that separates it from a call, pieces joined by newlines.
    """
    calls: list[ToolCall] = []
    pieces: list[str] = []
    position = 0
    for index, match in enumerate(_TOOL_CALL.finditer(completion)):
        pieces.append(completion[position:match.start()])
        position = match.end()
        calls.append(_hermes_call(match.group(1).strip(), f"{id_prefix}_{index}"))
    pieces.append(completion[position:])
    return "\n".join(p.strip() for p in pieces if p.strip()), calls


def _hermes_call(body: str, call_id: str) -> ToolCall:
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("name"), str):
        arguments = payload.get("arguments", {})
        # Some models write the arguments as a JSON string already: keep it as the raw text it is.
        return ToolCall(id=call_id, name=payload["name"],
                        arguments=arguments if isinstance(arguments, str) else json.dumps(arguments))
    name = _NAME.search(body)
    return ToolCall(id=call_id, name=name.group(1) if name else "", arguments=body)
