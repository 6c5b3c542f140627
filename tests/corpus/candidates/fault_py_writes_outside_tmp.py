"""Escape attempt: forward tries to write where a job must not: into our code (the `agent` package it
can import), the studio's checkout (var/, next to its database), the Python environment, system
directories and the home directory. Only the private /tmp is writable (and vanishes with the job; the
corpus test checks the host side too). Verdict: runtime_error whose message says "sandbox held"; a write
that lands makes it say "SANDBOX ESCAPE"."""
import os
import sys

import torch
import torch.nn as nn


def _try_write(path):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("escaped")
        return True
    except OSError:
        return False


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        package = os.path.dirname(os.path.abspath(sys.modules["agent"].__file__))
        checkout = os.path.dirname(package)
        targets = [os.path.join(package, "kstudio_escape.py"), os.path.join(checkout, "var", "kstudio_escape"),
                   os.path.join(checkout, "kstudio_escape"), os.path.join(sys.prefix, "kstudio_escape"),
                   os.path.join(os.path.dirname(torch.__file__), "kstudio_escape.py"), "/usr/lib/kstudio_escape",
                   "/etc/kstudio_escape", "/root/kstudio_escape", "/var/tmp/kstudio_escape"]
        if not _try_write("/tmp/kstudio_private/ok"):
            raise RuntimeError("the private /tmp is not writable: the sandbox is broken, not held")
        private = os.stat("/tmp/kstudio_private/ok").st_dev
        written = [path for path in targets if _try_write(path)]
        # A checkout that lives under /tmp (a CI clone) is mirrored into the job's private /tmp, so a write
        # under its path can land there: on the private tmpfs, gone with the job, not on the host.
        landed = [path for path in written if os.stat(path).st_dev != private]
        if landed:
            raise RuntimeError("SANDBOX ESCAPE: wrote " + ", ".join(landed))
        mirrored = f" ({len(written)} landed in the private /tmp)" if written else ""
        raise RuntimeError(f"sandbox held: all {len(targets)} writes outside the private /tmp refused{mirrored}")
