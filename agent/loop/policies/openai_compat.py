"""A policy backed by any OpenAI-compatible chat endpoint (vLLM's `vllm serve`, `transformers serve`,
hosted APIs): one streamed /chat/completions request per turn, with tool calls.

Errors that retrying can cure (connection refused, 429, 5xx) are retried with exponential backoff;
everything else becomes one PolicyError that says what was wrong and what to check.
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable

import httpx

from agent.loop.policies.base import PolicyError, PolicyTurn, ToolCall

# Statuses worth retrying: rate limiting and server-side failures (a model still loading, a restart).
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# The longest wait a server's Retry-After may ask of us; beyond this we use our own backoff.
_MAX_RETRY_AFTER_SECONDS = 60.0


class _Retryable(Exception):
    """A failure of one attempt that another attempt may not have."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class OpenAIPolicy:
    """Streams one assistant turn per `respond` call from `{base_url}/chat/completions`.

    base_url: the API root including its version, e.g. "http://127.0.0.1:8000/v1".
    model: the model name the server knows (vLLM's --served-model-name, or the path it loaded).
    timeout_seconds: the longest wait for the server's next bytes (connecting, or between chunks).
    retries: further attempts after the first, for connection errors, 429 and 5xx.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, temperature: float = 0.2,
                 max_tokens: int = 4096, timeout_seconds: float = 300.0, retries: int = 3,
                 backoff_seconds: float = 1.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"OpenAIPolicy base_url must start with http:// or https://, not {base_url!r}")
        if not model:
            raise ValueError("OpenAIPolicy model must name the model the server serves")
        if max_tokens < 1 or timeout_seconds <= 0 or retries < 0 or backoff_seconds < 0:
            raise ValueError("OpenAIPolicy needs max_tokens >= 1, timeout_seconds > 0, retries >= 0, backoff_seconds >= 0")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.name = f"openai:{model}"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_seconds = timeout_seconds
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        headers = {"Accept": "text/event-stream"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(timeout_seconds))

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
                on_text: Callable[[str], None] | None = None) -> PolicyTurn:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            # Servers that honour it send token counts in a last chunk; others ignore it.
            "stream_options": {"include_usage": True},
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if tools:
            body["tools"] = tools
        for attempt in range(self.retries + 1):
            try:
                return self._attempt(body, on_text)
            except _Retryable as exc:
                if attempt == self.retries:
                    raise PolicyError(f"{exc} (gave up after {attempt + 1} attempts)") from None
                delay = self.backoff_seconds * 2 ** attempt
                if exc.retry_after is not None:
                    delay = max(delay, min(exc.retry_after, _MAX_RETRY_AFTER_SECONDS))
                time.sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def _attempt(self, body: dict[str, Any], on_text: Callable[[str], None] | None) -> PolicyTurn:
        turn = _TurnBuilder()
        try:
            with self._client.stream("POST", self.url, json=body) as response:
                if response.status_code != 200:
                    response.read()
                    self._raise_for_status(response)
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, comments (": ping"), event names
                    data = line[len("data:"):].strip()
                    if data == "[DONE]":
                        break
                    chunk = _parse_chunk(data, self.url)
                    text = turn.add(chunk)
                    if text and on_text is not None:
                        on_text(text)
        except httpx.ConnectError as exc:
            raise _Retryable(f"could not connect to {self.url} ({exc}); check that the model server is running "
                             f"and that the base URL's host and port are right") from None
        except httpx.ConnectTimeout:
            raise _Retryable(f"connecting to {self.url} timed out after {self.timeout_seconds:g} s; check that "
                             f"the host is reachable and the server is up") from None
        except httpx.TimeoutException:
            raise PolicyError(f"{self.url} sent nothing for {self.timeout_seconds:g} s while generating; the server "
                              f"may be overloaded or stuck (raise timeout_seconds for slow models)") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if turn.received:
                # Text already went to on_text: a retry would stream it twice.
                raise PolicyError(f"{self.url} broke off the stream mid-turn ({exc}); check the server's log") from None
            raise _Retryable(f"{self.url} closed the connection before answering ({exc})") from None
        return turn.build()

    def _raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        detail = _server_message(response)
        if status in _RETRY_STATUSES:
            raise _Retryable(f"{self.url} answered HTTP {status}: {detail}", _retry_after(response))
        if status in (401, 403):
            raise PolicyError(f"{self.url} refused the request (HTTP {status}: {detail}); check the API key "
                              f"(api_key) and that it may use model {self.model!r}")
        if status == 404:
            raise PolicyError(f"{self.url} answered 404 Not Found: {detail}; check the base URL (it usually ends "
                              f"in /v1) and the model name {self.model!r}")
        raise PolicyError(f"{self.url} rejected the request (HTTP {status}): {detail}; check the model name "
                          f"{self.model!r} and the request settings")


class _TurnBuilder:
    """Assembles streamed deltas into one turn: text concatenated, tool calls keyed by index with
    their arguments concatenated, the last finish_reason and usage seen."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish_reason: str | None = None
        self.prompt_tokens: int | None = None
        self.completion_tokens: int | None = None
        self.received = False

    def add(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; return its new text (possibly empty)."""
        usage = chunk.get("usage")
        if usage:
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
        new_text = ""
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # we never ask for n > 1
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if content:
                self.text.append(content)
                new_text += content
                self.received = True
            for part in delta.get("tool_calls") or []:
                self.received = True
                call = self.calls.setdefault(part.get("index", len(self.calls)), {"id": "", "name": "", "arguments": ""})
                call["id"] = call["id"] or part.get("id") or ""
                function = part.get("function") or {}
                call["name"] = call["name"] or function.get("name") or ""
                call["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return new_text

    def build(self) -> PolicyTurn:
        calls = [ToolCall(id=c["id"] or f"call_{i}", name=c["name"], arguments=c["arguments"])
                 for i, c in sorted(self.calls.items())]
        return PolicyTurn(text="".join(self.text), tool_calls=calls, prompt_tokens=self.prompt_tokens,
                          completion_tokens=self.completion_tokens, finish_reason=self.finish_reason)


def _parse_chunk(data: str, url: str) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except json.JSONDecodeError:
        raise PolicyError(f"{url} streamed something that is not JSON: {data[:200]!r}; is this an "
                          f"OpenAI-compatible /chat/completions endpoint?") from None
    if not isinstance(chunk, dict):
        raise PolicyError(f"{url} streamed {data[:200]!r}, not a chat completion chunk")
    if "error" in chunk:
        error = chunk["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise PolicyError(f"{url} reported an error while generating: {message}")
    return chunk


def _server_message(response: httpx.Response) -> str:
    """The server's own explanation: OpenAI's {"error": {"message"}}, FastAPI's {"detail"}, or the text."""
    try:
        payload = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:500]
        if error:
            return str(error)[:500]
        if payload.get("detail"):
            return str(payload["detail"])[:500]
        if payload.get("message"):
            return str(payload["message"])[:500]
    return json.dumps(payload)[:500]


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["Retry-After"])
    except (KeyError, ValueError):
        return None
