"""The trusted side of the sandbox: starts a zygote, sends it jobs, reads what the job produced.

Each job's result, stdout and stderr arrive on pipes created here and handed to the zygote as file
descriptors, so a large result (reference outputs of an H100-sized problem) is read once, directly.
The result bytes are untrusted: callers decode them with safe decoders (JSON, weights-only loads).
"""
from __future__ import annotations

import logging
import math
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import agent.engine.sandbox.bwrap as bubblewrap
import agent.engine.sandbox.cpu_cgroup as cpu_cgroup
from agent.engine.sandbox.environment import JOB_ROOT_VARIABLE, SHARED_DIRS, WALL_VARIABLE, sandbox_environment
from agent.engine.sandbox.limits import Limits
from agent.engine.sandbox.wire import RESULT_DONE, STOP_FIGURES, recv_message, send_message

log = logging.getLogger(__name__)

_MAX_RESULT_BYTES = 8 << 30
# How long past a job's wall-clock limit the zygote may take to report on it (it kills the job at the limit and clears
# its namespace within 10 s) before the sandbox is taken for lost: a zygote stopped or hung would hold the caller for ever.
REPORT_GRACE = 60.0


class SandboxError(RuntimeError):
    """The sandbox machinery itself failed (not the job): our bug or a broken host."""


class SandboxLost(SandboxError):
    """The sandbox ended, or was closed, while a job ran in it (its zygote died), or the job broke the harness around
    it (a result over 8 GiB): nothing but that job and our supervisor of it ran there, so where the job runs untrusted
    code (a candidate's) this is that code's doing, not the engine's (agent/engine/evaluate/session.py). `stdout` and
    `stderr`: what the job had written by then."""

    def __init__(self, message: str, stdout: str = "", stderr: str = "") -> None:
        super().__init__(message)
        self.stdout, self.stderr = stdout, stderr


@dataclass(frozen=True)
class Job:
    function: str
    """"module:function" of OUR code; called in the child as function(payload, result_file, context)."""
    payload: Any
    device: str = "cpu"
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str | None = None
    fds: tuple[int, ...] = ()
    """Extra file descriptors the job receives as context["fds"] (e.g. a memfd of tensors); the caller keeps
    ownership of them."""
    control: JobControl | None = None
    """Lets the parent stop and resume every process of the running job (JobControl): the evaluator freezes a
    candidate's job while the baselines are timed, so nothing of the candidate's runs beside them."""
    detach: bool = False
    """Return as soon as the job's result is whole, before its process has exited (a GPU job's exit, the CUDA
    context's teardown, takes ~0.1 s on the H100 box). Only for jobs that run no untrusted code: the exit code
    is then taken as 0, and the sandbox's next job starts once the zygote has reaped this one."""
    private_dir: str | None = None
    """A directory the caller created directly under the sandbox's job root (KSTUDIO_JOB_ROOT): the one host
    directory this job may write (a build's output). Other jobs never see it; the job sees no other job's.
    Its path reaches the job as $KSTUDIO_PRIVATE_DIR. What the job leaves there is untrusted data."""


class JobControl:
    """Two pipes to the zygote that supervises one job: stop() sends SIGSTOP to every process of the job and
    returns once they are all stopped; resume() sends SIGCONT. The job itself never holds these pipes."""

    def __init__(self) -> None:
        self._commands = os.pipe()
        self._acks = os.pipe()
        self.stopped = False
        # The job's CPU seconds (all its processes, as the zygote read them at the last stop); None before one.
        self.cpu_seconds: float | None = None
        # Set for good when a stop came back with some process of the job still running (it forked faster than the
        # zygote could freeze it): that job was never reliably off the CPU while others were timed.
        self.escaped = False

    def zygote_fds(self) -> list[int]:
        return [self._commands[0], self._acks[1]]

    def stop(self, seconds: float = 5.0) -> bool:
        ok = self._say(b"S", seconds)
        if ok:
            figure = self._read(STOP_FIGURES.size, seconds)
            if len(figure) == STOP_FIGURES.size:
                cpu, frozen = STOP_FIGURES.unpack(figure)
                self.cpu_seconds = None if math.isnan(cpu) else cpu  # NaN: not read (a GPU job)
                self.escaped = self.escaped or not frozen
            else:
                self.cpu_seconds = None
        self.stopped = ok
        return ok

    def resume(self, seconds: float = 5.0) -> bool:
        ok = self._say(b"C", seconds)
        self.stopped = not ok and self.stopped
        return ok

    def _say(self, word: bytes, seconds: float) -> bool:
        """False when the zygote did not answer in time: the job has ended (or the zygote is gone)."""
        try:
            os.write(self._commands[1], word)
        except OSError:
            return False
        return self._read(1, seconds) == word.lower()

    def _read(self, size: int, seconds: float) -> bytes:
        """Up to `size` bytes from the zygote within `seconds` (fewer where it did not send them in time)."""
        got = b""
        deadline = time.monotonic() + seconds
        while len(got) < size:
            ready, _, _ = select.select([self._acks[0]], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(self._acks[0], size - len(got))
            if not chunk:
                break
            got += chunk
        return got

    def close(self) -> None:
        for fd in (*self._commands, *self._acks):
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass
class JobResult:
    exit_code: int | None
    signal: int | None
    killed: str | None  # "wall_time", "memory", "processes" or None
    seconds: float
    result: bytes
    stdout: str
    stderr: str
    isolation: str
    peak_rss: int = 0
    stdout_bytes: int = 0
    stderr_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed is None


class _Capture:
    """Keeps the head and the tail of a stream, counting what was dropped in between."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        dropped = self.total - len(self.head) - len(self.tail)
        middle = f"\n... [{dropped} bytes of output cut] ...\n".encode() if dropped > 0 else b""
        return bytes(self.head + middle + self.tail).decode("utf-8", errors="replace")


class Sandbox:
    """One zygote and the jobs sent to it, one at a time (a GPU worker runs one job at a time).

    `env` is the environment the sandbox draws from (default: this process's); only its allow-listed
    entries reach the zygote (environment.py). The cache directories it names (KSTUDIO_CACHE_DIR,
    TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR, TORCH_EXTENSIONS_DIR) are visible to jobs read-only; the only
    host directory a job may write is its own Job.private_dir under KSTUDIO_JOB_ROOT. `bwrap`: None uses bubblewrap where it works and warns loudly where not; True requires
    it; False runs without it (the inner namespaces only)."""

    def __init__(self, preload: tuple[str, ...] = ("agent.engine.evaluate.jobs",), env: dict[str, str] | None = None,
                 bwrap: bool | None = None) -> None:
        self.preload = preload
        self.env = env
        self.bwrap = bwrap
        self.wall = ""
        """"bwrap" once started under bubblewrap, else why not (also in every JobResult.isolation)."""
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self.startup_seconds = 0.0
        self._unread_reports = 0  # of detached jobs: the zygote's reports on them, still to be read
        # The cgroup the zygote and its jobs run in, whose usage is the jobs' CPU time (cpu_cgroup.py); None: /proc's.
        self.cgroup: str | None = None

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        if self._proc is not None:
            self.close()  # it died between jobs: its socket and cgroup go with it
        started = time.monotonic()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        source = os.environ if self.env is None else self.env
        path, why_not = bubblewrap.usable() if self.bwrap is not False else (None, "bubblewrap turned off for this sandbox")
        if path is None and self.bwrap:
            raise SandboxError(f"this sandbox requires bubblewrap: {why_not}")
        if path is None and self.bwrap is None:
            log.warning("SANDBOX WITHOUT BUBBLEWRAP: %s. Candidates run in user/pid/net/mount namespaces only, "
                        "with the host's filesystem visible read-only outside the hidden checkout and /tmp. "
                        "Install bubblewrap (`apt-get install bubblewrap`, or `make` as root).", why_not)
        self.wall = "bwrap" if path else why_not
        self.cgroup = cpu_cgroup.create()
        env = sandbox_environment(source, PYTHONPATH=_package_root(), **{WALL_VARIABLE: "bwrap" if path else "none"},
                                  **({cpu_cgroup.CGROUP_VARIABLE: self.cgroup} if self.cgroup else {}))
        argv = [sys.executable, "-m", "agent.engine.sandbox.zygote", str(theirs.fileno()), *self.preload]
        if env.get(JOB_ROOT_VARIABLE):
            os.makedirs(env[JOB_ROOT_VARIABLE], mode=0o700, exist_ok=True)
        if path:
            shared = [source[k] for k in SHARED_DIRS if source.get(k)]
            writable = [env[JOB_ROOT_VARIABLE]] if env.get(JOB_ROOT_VARIABLE) else []
            readable = [os.path.join(_package_root(), "agent"), *bubblewrap.python_paths(),
                        *(source[k] for k in ("CUDA_HOME", "CUDA_PATH") if source.get(k)), *shared]
            argv = bubblewrap.command(path, argv, env, readable=readable, writable=writable)
        if self.cgroup:
            argv = cpu_cgroup.enter_command(self.cgroup, argv)
        self._proc = subprocess.Popen(
            argv,
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
            cwd="/tmp" if path else _package_root(),
            # Its own session: a Ctrl-C at the terminal (`make run`) goes to the studio, which stops, and not to the
            # zygote, which would otherwise die first and fail the evaluation in hand. It still dies with this
            # process (PR_SET_PDEATHSIG, zygote.main), and the run is taken over when the studio starts again.
            start_new_session=True,
        )
        theirs.close()
        self._sock = ours
        try:
            hello, _ = recv_message(ours)
        except EOFError as exc:
            code = self._proc.wait()
            raise SandboxError(f"the sandbox zygote exited with code {code} before it was ready") from exc
        if not hello.get("ready"):
            self.close()
            raise SandboxError(hello.get("error") or f"unexpected hello from the zygote: {hello!r}")
        if self.cgroup and not cpu_cgroup.holds(self.cgroup, self._proc.pid):
            self.close()  # the zygote would read a cgroup its jobs are not in as their CPU time
            raise SandboxError(f"the sandbox's process {self._proc.pid} is not in its cgroup {self.cgroup}")
        self.startup_seconds = time.monotonic() - started

    def close(self) -> int | None:
        """Ends the zygote (it exits once its socket is closed and any job it runs has ended; killed after 5 s) and
        returns its exit status (negative: the signal that killed it), or None where none was running. A job running
        meanwhile in another thread ends with SandboxLost."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
        if self.cgroup:
            cpu_cgroup.remove(self.cgroup)
        return code

    def run(self, job: Job) -> JobResult:
        """Runs `job` and returns what it did. SandboxLost where the zygote died (or was closed) under it: the
        sandbox is closed then, and the next job starts a new one."""
        with self._lock:
            self.start()
            try:
                return self._run(job)
            except SandboxLost as exc:
                code = self.close()
                raise SandboxLost(f"{exc}; {_exit_text(code)}", exc.stdout, exc.stderr) from exc.__cause__ or exc
            except SandboxError:
                self.close()  # whatever the zygote is doing, the next job starts a new one
                raise

    def _run(self, job: Job) -> JobResult:
        assert self._sock is not None
        try:
            while self._unread_reports:  # the zygote answers in order: a detached job's report comes first
                recv_message(self._sock)
                self._unread_reports -= 1
        except (EOFError, OSError) as exc:  # before this job began: not its doing
            raise SandboxError(f"the sandbox zygote died after a detached job, before {job.function} began") from exc
        started = time.monotonic()
        pipes = [os.pipe() for _ in range(3)]
        for r, _ in pipes:
            _widen(r)
        request = {"function": job.function, "payload": job.payload, "device": job.device,
                   "limits": job.limits, "env": job.env, "workdir": job.workdir, "private_dir": job.private_dir,
                   "control": job.control is not None}
        control_fds = job.control.zygote_fds() if job.control is not None else []
        sock = self._sock
        result = bytearray()
        out, err = _Capture(job.limits.output_bytes), _Capture(job.limits.output_bytes)
        sinks = {pipes[0][0]: result, pipes[1][0]: out, pipes[2][0]: err}
        try:
            try:
                send_message(sock, request, fds=[w for _, w in pipes] + control_fds + list(job.fds))
            finally:
                for _, w in pipes:
                    os.close(w)
            info = self._collect(job, sock, sinks, pipes[0][0], started)
        except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
            raise SandboxLost(f"the sandbox zygote died while running {job.function}", out.text(), err.text()) from exc
        except SandboxLost as exc:
            raise SandboxLost(f"{exc} while running {job.function}", out.text(), err.text()) from exc
        finally:
            for fd in sinks:
                os.close(fd)
        if result.endswith(RESULT_DONE):
            del result[-len(RESULT_DONE):]
        return JobResult(
            exit_code=info.get("exit_code"), signal=info.get("signal"), killed=info.get("killed"),
            seconds=info["seconds"], result=bytes(result), stdout=out.text(), stderr=err.text(),
            isolation=info.get("isolation", "unknown") + ("" if self.wall == "bwrap" else f" (WARNING: {self.wall})")
            + ("; CPU time from its cgroup" if self.cgroup else "; CPU time from /proc (no cgroup could be made)"),
            peak_rss=info.get("peak_rss", 0),
            stdout_bytes=out.total, stderr_bytes=err.total,
        )

    def _collect(self, job: Job, sock: socket.socket, sinks: dict[int, Any], result_fd: int,
                 started: float) -> dict[str, Any]:
        """Reads the job's pipes into `sinks` (closing and dropping each at its end) until the zygote's report on the
        job: the report, or a stand-in where the job is detached and its result (the sink of `result_fd`) whole."""
        result = sinks[result_fd]
        selector = selectors.DefaultSelector()
        for fd in sinks:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        selector.register(sock, selectors.EVENT_READ)
        info: dict[str, Any] | None = None
        grace_until: float | None = None
        report_by = started + job.limits.wall_seconds + REPORT_GRACE
        try:
            while sinks or info is None:
                if job.detach and info is None and result_fd not in sinks and result.endswith(RESULT_DONE):
                    self._unread_reports += 1
                    return {"exit_code": 0, "seconds": time.monotonic() - started, "isolation": "detached at its result"}
                if info is None and self._sock is not sock:
                    # Closed from another thread (close()): its report will never come, and a closed socket never
                    # reads as ready, so without this the loop would wait for ever.
                    raise SandboxLost("the sandbox was closed")
                if info is None and time.monotonic() > report_by:
                    raise SandboxLost(f"the sandbox's zygote had not reported on the job {REPORT_GRACE:g} s past its "
                                      f"{job.limits.wall_seconds:g} s wall-clock limit (stopped or hung)")
                if info is not None and grace_until is None:
                    grace_until = time.monotonic() + 2.0  # a leftover holder of a pipe must not hang us
                if grace_until is not None and time.monotonic() > grace_until:
                    break
                for key, _ in selector.select(timeout=0.5):
                    if key.fileobj is sock:
                        selector.unregister(sock)
                        try:
                            info, _ = recv_message(sock)
                        except OSError:
                            if self._sock is sock:
                                raise
                            raise SandboxLost("the sandbox was closed") from None
                        continue
                    fd = key.fd
                    try:
                        data = os.read(fd, 16 << 20)
                    except BlockingIOError:
                        continue
                    if not data:
                        selector.unregister(fd)
                        os.close(fd)
                        del sinks[fd]
                        continue
                    sink = sinks[fd]
                    if isinstance(sink, bytearray):
                        if len(sink) + len(data) > _MAX_RESULT_BYTES:
                            raise SandboxLost("a job's result exceeded 8 GiB")
                        sink += data
                    else:
                        sink.feed(data)
        finally:
            selector.close()
        assert info is not None
        return info


def _exit_text(code: int | None) -> str:
    """How the zygote's process ended, as subprocess reports it (negative: the signal that killed it)."""
    if code is None:
        return "the zygote's process was gone"
    if code < 0:
        try:
            return f"the zygote's process was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"the zygote's process was killed by signal {-code}"
    return f"the zygote's process exited with code {code}"


def _widen(fd: int) -> None:
    """A 1 MiB pipe buffer instead of 64 KiB: 16x fewer wake-ups for results of gigabytes."""
    import fcntl

    try:
        fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ
    except OSError:
        pass  # above /proc/sys/fs/pipe-max-size: the default works, only slower


def _package_root() -> str:
    # agent/engine/sandbox/client.py -> the checkout (or site-packages) holding agent/
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
