"""Small jobs that report what a sandboxed child can and cannot do.

Used by the tests and by `python -m agent.engine.sandbox.probes` on a new host to check its isolation.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from typing import Any, BinaryIO

from agent.engine.sandbox.wire import RESULT_DONE


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
        "can_read": {p: _readable(p) for p in payload.get("paths", [])},
        "contents": {p: _head(p) for p in payload.get("paths", [])},
    }
    result.write(json.dumps(facts).encode())


def _readable(path: str) -> bool:
    """Whether the file really opens and reads (os.access only compares mode bits: a /proc entry of a
    non-dumpable process passes it and still refuses the read)."""
    return _head(path) is not None


def _head(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None


def attempt_writes(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Try to write each of payload["paths"]; report which writes landed (as the job saw it)."""
    landed = {}
    for path in payload["paths"]:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write("written by a sandboxed job")
            landed[path] = True
        except OSError:
            landed[path] = False
    result.write(json.dumps(landed).encode())


def cuda(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Initialise CUDA and run one kernel: whether the GPU works inside the sandbox on this host."""
    import torch

    torch.cuda.init()
    value = (torch.ones(4, device="cuda") * 2).sum().item()
    result.write(json.dumps({"devices": torch.cuda.device_count(), "sum": value,
                             "name": torch.cuda.get_device_name(0)}).encode())


def devices(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Which of payload["paths"] (device nodes) open read-write, and the GPUs CUDA shows: what a job can reach."""
    opened: dict[str, bool | str] = {}
    for path in payload["paths"]:
        try:
            os.close(os.open(path, os.O_RDWR))
            opened[path] = True
        except OSError as exc:
            opened[path] = os.strerror(exc.errno or 0)
    facts: dict[str, Any] = {"opened": opened, "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if payload.get("cuda"):
        import torch

        facts["uuids"] = [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(torch.cuda.device_count())]
    result.write(json.dumps(facts).encode())


def echo(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    print(payload.get("stdout", ""), end="", flush=True)
    print(payload.get("stderr", ""), end="", file=sys.stderr, flush=True)
    result.write(payload.get("result", b""))


def slow_exit(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """A whole result, then a long way out (as a GPU job's teardown is): what a detached job returns early from.
    With "fail", the job dies after part of its result instead."""
    result.write(payload["result"])
    if payload.get("fail"):
        result.flush()
        raise RuntimeError("the job failed after part of its result")
    result.write(RESULT_DONE)
    result.close()
    time.sleep(payload["seconds"])


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


def zombies(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """`count` children that exit at once and are never reaped, then a sleep of `seconds`: pids held, nothing run."""
    for _ in range(payload["count"]):
        if os.fork() == 0:
            os._exit(0)
    time.sleep(payload["seconds"])
    result.write(b"held")


def segfault(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    import ctypes

    ctypes.string_at(0)


if __name__ == "__main__":
    from agent.engine.sandbox import Job, Sandbox

    with Sandbox(preload=()) as box:
        out = box.run(Job("agent.engine.sandbox.probes:report", {"paths": sys.argv[1:]}))
        print(json.dumps(json.loads(out.result or b"{}"), indent=2) if out.ok else out.stderr)


def ticks(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """The host's monotonic clock every 5 ms for `seconds`, from the job and from a child it forked: a job that
    was stopped shows the gap (client.JobControl)."""
    import json

    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        os.write(write, json.dumps(_tick_for(payload["seconds"])).encode())
        os._exit(0)
    os.close(write)
    seen = _tick_for(payload["seconds"])
    child = b""
    while chunk := os.read(read, 1 << 20):
        child += chunk
    os.wait()
    result.write(json.dumps({"job": seen, "child": json.loads(child)}).encode())


def _tick_for(seconds: float) -> list[float]:
    """The monotonic clock every 5 ms for `seconds`: a gap is a time this thread did not run."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        seen.append(time.monotonic())
        time.sleep(0.005)
    return seen


def spin_everywhere(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Burns `seconds` of CPU at once in the job's main thread, a second thread of its own, a child process it reaps,
    and a grandchild orphaned by its parent's exit, then sleeps `idle` seconds: the CPU time the zygote reads at a stop
    must hold every one of them (agent/engine/evaluate/cpu_share.py)."""
    import threading

    def spin() -> None:
        end = time.thread_time() + payload["seconds"]
        while time.thread_time() < end:
            pass

    helper = threading.Thread(target=spin)
    helper.start()
    child = os.fork()
    if child == 0:
        if os.fork() == 0:  # the grandchild: its parent exits at once, so it is an orphan while it spins
            spin()
            os._exit(0)
        os._exit(0)
    os.waitpid(child, 0)  # the child exited at once: the orphan spins on
    spin()
    helper.join()
    time.sleep(payload["idle"])
    result.write(b"spun")


def spin_in_a_swarm(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """`count` child processes, one after the other, each burning `each` seconds of CPU (under one 10 ms tick) and
    left unreaped, then idles `idle` seconds: the CPU time read at a stop must hold them all."""
    for _ in range(payload["count"]):
        if os.fork() == 0:
            end = time.thread_time() + payload["each"]
            while time.thread_time() < end:
                pass
            os._exit(0)
    time.sleep(payload["idle"])
    result.write(b"swarmed")


def spin_unreaped(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Burns `seconds` of CPU in two helper processes whose time reaches no per-process figure, then idles `idle`
    seconds: a child reaped by the kernel (the job ignores SIGCHLD) and an orphaned grandchild (reaped by the zygote or
    by init). The sandbox's cgroup still holds them (cpu_cgroup.py)."""
    import signal

    def spin() -> None:
        end = time.thread_time() + payload["seconds"]
        while time.thread_time() < end:
            pass

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    if os.fork() == 0:
        spin()
        os._exit(0)
    if os.fork() == 0:
        if os.fork() == 0:
            spin()
            os._exit(0)
        os._exit(0)
    time.sleep(payload["idle"])
    result.write(b"spun")


def ticks_behind_a_dead_leader(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Like `ticks`, from a thread of a child process whose first thread has exited (SYS_exit): the process reads as a
    zombie in /proc while its thread runs. A stop must stop it too (zygote._freeze)."""
    import ctypes
    import json
    import platform
    import threading

    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)

        def tick() -> None:
            os.write(write, json.dumps(_tick_for(payload["seconds"])).encode())
            os._exit(0)

        threading.Thread(target=tick).start()
        exit_thread = {"x86_64": 60, "aarch64": 93}[platform.machine()]  # SYS_exit: this thread only, not the process
        ctypes.CDLL(None, use_errno=True).syscall(exit_thread, 0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 1 << 20):
        child += chunk
    result.write(json.dumps({"child": json.loads(child)}).encode())


def signal_zygote(payload: Any, result: BinaryIO, context: dict[str, Any]) -> None:
    """Sends every signal there is to each pid that may name the zygote: pid 1 (the zygote under bubblewrap, the job
    itself without it), the parent of the job's first process, and payload["pid"] (the zygote's pid on the host), all
    but the job's own; SIGSTOP's target is read after it, and SIGKILL goes last. Reports what each kill returned and
    each target's state after SIGSTOP: the zygote must live on through all of it, unstopped (zygote.deaf_to_signals)."""
    import signal

    first = os.getppid()  # under bubblewrap the job's first process (the zygote's child); else 0, outside the namespace
    targets = {1, payload["pid"], *([_parent_of(first)] if first > 0 else [])} - {os.getpid(), first, 0, None}
    order = [s for s in range(1, 65) if s not in (signal.SIGKILL, signal.SIGCONT)] + [signal.SIGKILL]
    sent: dict[str, dict[str, str]] = {}
    stopped: dict[str, str] = {}
    for pid in sorted(targets):
        kills = sent[str(pid)] = {}
        for number in order:
            try:
                os.kill(pid, number)
                kills[str(number)] = "sent"
            except OSError as exc:
                kills[str(number)] = exc.strerror or str(exc)
            time.sleep(0.005)
            if number == signal.SIGSTOP:
                time.sleep(0.1)
                stopped[str(pid)] = _state(pid)
                try:
                    os.kill(pid, signal.SIGCONT)  # a zygote that did stop would hold the job past its wall time
                except OSError:
                    pass
    time.sleep(0.2)  # whatever was delivered has acted by now
    result.write(json.dumps({"sent": sent, "after_stop": stopped}).encode())


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _state(pid: int) -> str:
    """The state letter of `pid` in /proc (T: stopped), or why it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError) as exc:
        return f"unreadable: {exc}"
