"""The API's JSON parser, bounded in depth: Python's json module raises RecursionError (not ValueError) on a
body nested some thousands deep, which DRF's parser let through as a 500, and a body nested a few hundred deep
would still exhaust the stack later (serializers, jsonb). No request of ours nests more than a few levels."""
from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

MAX_DEPTH = 32


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"The JSON body is nested too deeply; the API takes at most {MAX_DEPTH} levels.") from None
        if _depth_over(data, MAX_DEPTH):
            raise ParseError(f"The JSON body is nested more than {MAX_DEPTH} levels deep; send a flatter body.")
        return data


def _depth_over(data: Any, limit: int) -> bool:
    """Whether lists and objects nest deeper than `limit` (iterative: no recursion on a hostile body)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return False
