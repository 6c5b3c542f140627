"""Escape attempt: forward looks for the studio's secrets in its own environment, in the exec-time
environment block of every process it can see (/proc/*/environ), and in the studio's files (the
checkout holding the `agent` package: var/secret_key, the SQLite database, .env, the settings), plus
the usual credential files. Verdict: runtime_error whose message says "sandbox held"; anything found
makes it say "SANDBOX ESCAPE" and name it."""
import os
import re
import sys

import torch
import torch.nn as nn

SECRET = re.compile(rb"SECRET_KEY|DATABASE_URL|REDIS_URL|_API_KEY|_TOKEN|PASSWORD", re.IGNORECASE)


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError:
        return None


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        found = [f"env {name}" for name in os.environ if SECRET.search(name.encode())]
        environ_blocks = 0
        for pid in [p for p in os.listdir("/proc") if p.isdigit()] + ["self"]:
            block = _read(f"/proc/{pid}/environ")
            if block is not None:
                environ_blocks += 1
                found += [f"/proc/{pid}/environ {m.decode()}" for m in set(SECRET.findall(block))]
        checkout = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["agent"].__file__)))
        files = [os.path.join(checkout, name) for name in
                 ("var/secret_key", "var/studio.sqlite3", ".env", "studio/settings.py", "manage.py", "pyproject.toml")]
        files += [os.path.expanduser("~/.pgpass"), "/root/.pgpass", "/root/.ssh/id_rsa", "/root/.netrc"]
        found += [f"file {path}" for path in files if _read(path) is not None]
        if found:
            raise RuntimeError("SANDBOX ESCAPE: " + ", ".join(sorted(set(found))))
        raise RuntimeError(f"sandbox held: no secret in the environment or {environ_blocks} readable environ "
                           f"blocks; none of {len(files)} studio and credential files readable")
