"""Length-prefixed pickle messages over a Unix socket, with file descriptors riding along.

Both ends are our own code (client and zygote); nothing a job produces travels this way."""
from __future__ import annotations

import pickle
import socket
import struct
from typing import Any

_HEADER = struct.Struct("!Q")
# Appended to a job's result pipe by our harness once the job function has returned normally (zygote._run_job).
# The client strips it and so knows the result is whole before the process has exited.
RESULT_DONE = b"\0kstudio-result-done\0"
# After a stop's acknowledgement the zygote sends the job's CPU seconds and whether every process of it stopped
# (client.JobControl.stop).
STOP_FIGURES = struct.Struct("<d?")


def send_message(sock: socket.socket, obj: Any, fds: list[int] | None = None) -> None:
    body = pickle.dumps(obj)
    if fds:
        socket.send_fds(sock, [_HEADER.pack(len(body))], fds)
    else:
        sock.sendall(_HEADER.pack(len(body)))
    sock.sendall(body)


def recv_message(sock: socket.socket, maxfds: int = 0) -> tuple[Any, list[int]]:
    if maxfds:
        head, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, maxfds)
    else:
        head, fds = sock.recv(_HEADER.size, socket.MSG_WAITALL), []
    if len(head) < _HEADER.size:
        raise EOFError("the other end of the sandbox socket closed")
    (length,) = _HEADER.unpack(head)
    chunks, received = [], 0
    while received < length:
        chunk = sock.recv(min(length - received, 1 << 20))
        if not chunk:
            raise EOFError("the sandbox socket closed in the middle of a message")
        chunks.append(chunk)
        received += len(chunk)
    return pickle.loads(b"".join(chunks)), list(fds)
