"""Small jobs that report what a sandboxed child can and cannot do.

Used by the tests and by `python -m agent.sandbox.probes` on a new host to check its isolation.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any, BinaryIO


def report(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """What the child sees: pid, processes, /tmp, network, environment."""
    try:
        socket.create_connection(("127.0.0.1", int(payload.get("port", 5432))), timeout=1).close()
        network = "connected"
    except OSError as exc:
        network = f"refused: {exc}"
    facts = {
        "pid": os.getpid(),
        "visible_pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "tmp": sorted(os.listdir("/tmp")),
        "network": network,
        "env": dict(os.environ),
        "isolation": context["isolation"],
        "can_read": {p: os.access(p, os.R_OK) for p in payload.get("paths", [])},
    }
    result.write(json.dumps(facts).encode())


def echo(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    print(payload.get("stdout", ""), end="", flush=True)
    print(payload.get("stderr", ""), end="", file=sys.stderr, flush=True)
    result.write(payload.get("result", b""))


def sleep(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    _name(payload.get("tag"))
    if payload.get("grandchild"):
        if os.fork() == 0:
            os.setsid()  # tries to escape the process group: must still die with the job
            time.sleep(payload["seconds"])
            os._exit(0)
    time.sleep(payload["seconds"])


def _name(tag: str | None) -> None:
    """Rename this process (and so its forks) so a test finds exactly its own, whatever else runs."""
    if tag:
        with open("/proc/self/comm", "w") as comm:
            comm.write(tag[:15])


def allocate(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    hoard = []
    while True:
        hoard.append(bytearray(64 << 20))
        for i in range(0, len(hoard[-1]), 4096):
            hoard[-1][i] = 1  # touch every page so it is resident, not just reserved


def fork_bomb(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    while True:
        try:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        except OSError:
            time.sleep(0.01)


def segfault(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    import ctypes

    ctypes.string_at(0)


if __name__ == "__main__":
    from agent.sandbox import Job, Sandbox

    with Sandbox(preload=()) as box:
        out = box.run(Job("agent.sandbox.probes:report", {"paths": sys.argv[1:]}))
        print(json.dumps(json.loads(out.result or b"{}"), indent=2) if out.ok else out.stderr)
