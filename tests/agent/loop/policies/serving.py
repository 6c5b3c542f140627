"""Helpers shared by the policy tests and their server fixture."""
from __future__ import annotations

import socket
from dataclasses import dataclass

STARTUP_SECONDS = 120


@dataclass
class Served:
    base_url: str
    model: str


def free_port() -> int:
    """A loopback port nothing listens on (the OS picks it, then we let it go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
