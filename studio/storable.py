"""What Postgres will store: its text and jsonb types refuse the NUL character, and JSON has no
infinity or NaN. Model output and candidate logs can hold any of them (a tiny model happily emits
U+0000), so everything we persist from them passes through here instead of failing the step."""
from __future__ import annotations

import math
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

# U+FFFD, the replacement character: visibly "something unprintable was here".
REPLACEMENT = "\ufffd"


def storable_text(text: str) -> str:
    return text.replace("\x00", REPLACEMENT) if "\x00" in text else text


def storable(value: Any) -> Any:
    """`value` with every NUL replaced and every non-finite float written as "inf", "-inf" or "nan"."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    return value


class StorableJSONEncoder(DjangoJSONEncoder):
    """The encoder of every JSONField that may hold model output or candidate logs."""

    def encode(self, o: Any) -> str:
        return super().encode(storable(o))
