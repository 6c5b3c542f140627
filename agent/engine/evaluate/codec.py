"""How a sandboxed job hands results back: one JSON header plus tensors, decoded safely.

A job's output is untrusted (it ran next to a candidate), so it is never unpickled: the header is
JSON and tensors go through `torch.load(weights_only=True)`, which only rebuilds tensors.
"""
from __future__ import annotations

import io
import json
import struct
from typing import Any, BinaryIO

import torch

_LEN = struct.Struct("!Q")


class DecodeError(ValueError):
    """The job's result was malformed: it crashed mid-write, or something wrote over the pipe."""


def write_result(stream: BinaryIO, header: dict[str, Any], tensors: dict[str, Any] | None = None) -> None:
    head = json.dumps(header).encode()
    body = io.BytesIO()
    torch.save(tensors or {}, body)
    stream.write(_LEN.pack(len(head)))
    stream.write(head)
    stream.write(body.getbuffer())
    stream.flush()


def read_result(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    if len(data) < _LEN.size:
        raise DecodeError(f"the job returned {len(data)} bytes, fewer than a result header")
    (length,) = _LEN.unpack_from(data)
    try:
        header = json.loads(data[_LEN.size : _LEN.size + length])
        tensors = torch.load(io.BytesIO(data[_LEN.size + length :]), weights_only=True) if len(data) > _LEN.size + length else {}
    except Exception as exc:  # noqa: BLE001 - any corruption is the same finding
        raise DecodeError(f"the job's result could not be decoded: {exc}") from exc
    if not isinstance(header, dict):
        raise DecodeError("the job's result header is not a JSON object")
    return header, tensors

