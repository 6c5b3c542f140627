"""Escape attempt: forward tries to reach the studio's services and the internet (Postgres, Redis and
daphne's ports on loopback, a public resolver). The sandbox has no network, so every attempt fails and
the candidate reports what it saw by raising. Verdict: runtime_error whose message says
"sandbox held"; a connection that succeeds makes it say "SANDBOX ESCAPE" instead."""
import socket

import torch
import torch.nn as nn

TARGETS = [("127.0.0.1", 5432), ("127.0.0.1", 6379), ("127.0.0.1", 8000), ("1.1.1.1", 53), ("8.8.8.8", 443)]


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seen = []
        for host, port in TARGETS:
            try:
                socket.create_connection((host, port), timeout=2).close()
                raise RuntimeError(f"SANDBOX ESCAPE: connected to {host}:{port}")
            except OSError as exc:
                seen.append(f"{host}:{port} {exc.strerror or exc}")
        try:
            socket.getaddrinfo("example.com", 443)
            raise RuntimeError("SANDBOX ESCAPE: resolved example.com")
        except OSError as exc:
            seen.append(f"dns {exc}")
        raise RuntimeError("sandbox held: no connection: " + "; ".join(seen))
