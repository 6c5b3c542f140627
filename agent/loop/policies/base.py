"""The seam every policy implements: given the conversation so far and the tool schemas, produce
the next assistant turn (text and tool calls), streaming its text as it is generated.

Messages and tools are in the OpenAI chat format, the lingua franca of vLLM, `transformers serve`
and hosted endpoints:
  messages: [{"role": "system"|"user"|"assistant"|"tool", "content": str,
              "tool_calls": [...] (assistant), "tool_call_id": str (tool)}]
  tools:    [{"type": "function", "function": {"name", "description", "parameters": JSON schema}}]
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol


class PolicyError(RuntimeError):
    """The policy could not produce a turn (endpoint down, misconfigured, timed out after retries).
    The message says what was wrong and what to check; the run fails visibly rather than looping."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str
    """The raw JSON text the model wrote: it may be malformed, and the loop reports that to the model."""


@dataclass
class PolicyTurn:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in self.tool_calls]
        return message


class Policy(Protocol):
    name: str
    """What produced the turns, for provenance (e.g. "openai:Qwen2.5-Coder-7B", "scripted")."""

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                on_text: Callable[[str], None] | None = None) -> PolicyTurn:
        """The next assistant turn. `on_text` receives text chunks as they are generated."""
        ...

    def close(self) -> None:
        """Release what the policy holds (a connection pool, a loaded model); the studio calls it after each turn."""
        ...
