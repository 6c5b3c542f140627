"""The warm parent: imports torch once (never touching CUDA), then forks one isolated child per job.

A fresh Python with torch and CUDA costs ~4.7 s on the H100 box; a fork of this process plus CUDA
init costs ~0.35 s. The zygote never runs untrusted code itself: each job runs two forks down,
as the first process of new namespaces, with rlimits, while the zygote enforces wall time, memory
and process count on the whole tree and kills it when one is exceeded.

Wire format (both ends are ours, so pickle is fine here; what children produce never passes
through this process: it goes straight to the client through the pipes it handed over).
"""
from __future__ import annotations

import importlib
import json
import math
import os
import select
import signal
import socket
import sys
import time
import traceback
from typing import Any

import psutil

import agent.engine.sandbox.bwrap as bwrap
import agent.engine.sandbox.isolation as isolation
import agent.engine.sandbox.cpu_cgroup as cpu_cgroup
from agent.engine.sandbox.environment import (JOB_ROOT_VARIABLE, PRIVATE_DIR_VARIABLE, SHARED_DIRS, TRUSTED_DIR_VARIABLE,
                                       WALL_VARIABLE, sandbox_environment)
from agent.engine.sandbox.limits import Limits, apply_rlimits
from agent.engine.sandbox.wire import RESULT_DONE, STOP_FIGURES, recv_message, send_message

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../agent
_POLL_SECONDS = 0.02
_MAX_FDS = 12  # result, stdout, stderr, a job control's two pipes and a job's own extra descriptors
_WATCH_EVERY = 5  # resource checks every 5 polls (100 ms): psutil walks /proc
# SIGCHLD keeps its default action (nothing: the child stays a zombie until waitpid reads it); ignored, the kernel would
# reap every job before the zygote read how it ended. SIGKILL and SIGSTOP cannot be caught or ignored.
_DEFAULT_KEPT = frozenset({signal.SIGCHLD})
_UNCATCHABLE = frozenset({signal.SIGKILL, signal.SIGSTOP})


def _child_environment(device: str, extra: dict[str, str]) -> dict[str, str]:
    """What a job sees of the environment: enough to run compilers and CUDA, no secrets (the zygote's
    own environment was filtered by the client already; filtered again here, then the job's `env`,
    which is our code's choice)."""
    env = sandbox_environment(os.environ)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(extra)
    return env


def _run_job(request: dict[str, Any], result_fd: int, isolation_level: str, extra_fds: list[int]) -> int:
    """In the sandbox's first process: call the job function and hand it the result pipe."""
    env = _child_environment(request["device"], request.get("env", {}))
    env.pop(PRIVATE_DIR_VARIABLE, None)
    if request.get("private_dir"):
        env[PRIVATE_DIR_VARIABLE] = request["private_dir"]
    os.environ.clear()
    os.environ.update(env)
    workdir = request.get("workdir") or "/tmp"
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
    module_name, _, function_name = request["function"].partition(":")
    function = getattr(importlib.import_module(module_name), function_name)
    with os.fdopen(result_fd, "wb", buffering=1 << 20) as result:
        function(request["payload"], result,
                 {"isolation": isolation_level, "limits": request["limits"], "fds": extra_fds})
        try:
            result.write(RESULT_DONE)
        except (OSError, ValueError):
            pass  # the job closed its own result pipe: the client waits for the exit, as for any job
    return 0


def deaf_to_signals() -> dict[int, Any]:
    """Ignore every signal but SIGCHLD (and SIGKILL and SIGSTOP, which no process can): returns what each was before,
    for the jobs (`hear_signals`).

    Under bubblewrap the zygote is pid 1 of the pid namespace its jobs share, and the kernel gives a namespace's init
    only the signals from inside it that it catches: Python's own SIGINT handler let a candidate's `os.kill(1,
    SIGINT)` end the zygote with KeyboardInterrupt, and with it the evaluation, as an error instead of the candidate's
    verdict. A signal ignored, or left at its default action, by init is dropped; SIGKILL and SIGSTOP from inside
    are dropped too. Without bubblewrap the jobs live in pid namespaces of their own, where no pid names the zygote;
    ignoring is the wall where that layer is missing as well (a job in the host's pid namespace, rlimits-only, can
    still SIGKILL it: the evaluation then blames the candidate, session.py). Faults of the zygote's own (SIGSEGV,
    SIGBUS, an abort) still end it: the kernel and abort() put back the default action of a fault signal that is
    ignored. glibc's own SIGCANCEL and SIGSETXID (32, 33) cannot be set here; their handlers act only on a signal the
    process sent itself."""
    before: dict[int, Any] = {}
    for sig in signal.valid_signals():
        if sig in _UNCATCHABLE:
            continue
        try:
            previous = signal.getsignal(sig)
            signal.signal(sig, signal.SIG_DFL if sig in _DEFAULT_KEPT else signal.SIG_IGN)
        except (OSError, ValueError):
            continue
        before[sig] = previous
    return before


def hear_signals(before: dict[int, Any]) -> None:
    """In a job's first process: each signal's action as it was before `deaf_to_signals` (an ignored signal stays
    ignored across fork and exec: a job, its compilers and their children would otherwise ignore SIGTERM and SIGINT)."""
    for sig, action in before.items():
        signal.signal(sig, action if action is not None else signal.SIG_DFL)


def _first_child(request: dict[str, Any], fds: list[int], status_w: int, job_signals: dict[int, Any]) -> None:
    """C0: the signals' actions a job expects, new session, rlimits, namespaces; forks C1 (pid 1 of a new pid
    namespace, except under bwrap, whose pid namespace the job shares with the zygote alone) and waits."""
    result_fd, out_fd, err_fd, *extra_fds = fds
    hear_signals(job_signals)
    zygote = os.getppid()
    os.setsid()
    # Die with the zygote: a job whose supervisor is gone (its worker was killed) must not live on,
    # holding the GPU (C1 already dies with C0). Checked after the prctl: the zygote may be gone already.
    isolation._libc.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != zygote:
        os._exit(72)
    limits: Limits = request["limits"]
    apply_rlimits(limits, address_space=request["device"] == "cpu")
    walled = os.environ.get(WALL_VARIABLE) == "bwrap"
    try:
        isolation.enter_namespaces(pid_namespace=not walled)
        level = "bwrap+namespaces" if walled else "namespaces"
    except OSError as exc:  # e.g. user namespaces disabled: carry on, but say so in the verdict
        level = ("bwrap+" if walled else "") + f"rlimits-only ({exc.strerror})"
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(status_w)
            # The zygote is not dumpable (its memory stays closed to jobs); the job itself may be, so
            # that its own /proc/self entries belong to it.
            isolation._libc.prctl(isolation.PR_SET_DUMPABLE, 1, 0, 0, 0)
            if level.endswith("namespaces"):
                shared = _shared_dirs(request.get("env", {}))
                private = _private_dir(request.get("private_dir"))
                keep = shared + _own_paths() + ((private,) if private else ())
                isolation.finish_inside_namespace(hide=_hidden_dirs(walled), keep=keep, private_proc=not walled,
                                                  read_only=shared, private_root=_job_root(),
                                                  private_dir=private)
            else:
                isolation.drop_privileges()
            code = _run_job(request, result_fd, level, extra_fds)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - the harness itself failed; report and exit non-zero
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(result_fd)
    os.write(status_w, json.dumps({"pid": pid, "isolation": level}).encode() + b"\n")
    _, status = os.waitpid(pid, 0)
    os.write(status_w, json.dumps({"status": status}).encode() + b"\n")
    os._exit(0)


def _shared_dirs(job_env: dict[str, str]) -> tuple[str, ...]:
    """The shared caches, as the zygote's environment and the job's name them: each is made read-only in the
    job's mount namespace (under bwrap they are read-only already; without it this is the only wall)."""
    named = {os.environ.get(k) for k in SHARED_DIRS} | {job_env.get(k) for k in SHARED_DIRS}
    return tuple(sorted(p for p in named if p and os.path.isdir(p)))


def _job_root() -> str:
    root = os.environ.get(JOB_ROOT_VARIABLE, "")
    return os.path.realpath(root) if root else ""


def _private_dir(path: str | None) -> str | None:
    """The job's own writable directory: it must be a direct child of the sandbox's job root."""
    if not path:
        return None
    root = _job_root()
    real = os.path.realpath(path)
    if not root or os.path.dirname(real) != root or not os.path.isdir(real):
        raise RuntimeError(f"a job's private directory {path!r} is not a directory directly under the job root {root!r}")
    return real


def _own_paths() -> tuple[str, ...]:
    """Our package and the Python environment running it: bound back into a hidden directory when
    they live there (a checkout or virtualenv under /tmp, as CI clones may be; the checkout itself)."""
    import site

    import torch

    paths = {_PACKAGE_DIR, os.path.dirname(os.path.dirname(torch.__file__)), *bwrap.python_paths(),
             *site.getsitepackages()}
    return tuple(sorted(p for p in paths if p))


def _hidden_dirs(walled: bool) -> tuple[str, ...]:
    """Directories a job gets as empty tmpfs (plus what _own_paths keeps). Under bwrap /tmp and the shared-memory
    directories: the studio's checkout is not mounted at all. Without bwrap, the checkout too (its var/ holds the
    secret key and the SQLite database, its .env the settings), when this package runs from one. /dev/shm and
    /dev/mqueue are bwrap's (one for the zygote's whole life) or the host's: a file left there by one job was read by
    the next evaluation's, another user's candidate (a channel between evaluations, and state carried across them)."""
    checkout = os.path.dirname(_PACKAGE_DIR)
    trusted = os.environ.get(TRUSTED_DIR_VARIABLE, "")
    private = ("/tmp", "/dev/shm", "/dev/mqueue")
    hidden = private if walled else (*private, *((trusted,) if trusted else ()))  # bwrap never binds it
    if walled or not os.path.isfile(os.path.join(checkout, "pyproject.toml")) or checkout == "/":
        return hidden
    return (*hidden, checkout)


def _job_processes(pid: int, dead_too: bool = False) -> list[psutil.Process]:
    """The job's processes: C0's tree; under bwrap, where the zygote is pid 1 of a namespace of its own
    and a job's orphans come to it, every process there but the zygote. `dead_too`: zombies as well, which run
    nothing but each hold a pid (the process limit counts them: thousands kept unreaped drained the host's pids and
    made every walk of the tree, and so every stop, slower)."""
    if os.getpid() == 1:
        procs = psutil.Process().children(recursive=True)
    else:
        procs = _tree(pid)
    if dead_too:
        return procs
    return [proc for proc, _ in _live_threads(procs)]


def _live_threads(procs: list[psutil.Process]) -> list[tuple[psutil.Process, list[str]]]:
    """Each live process of `procs` with its threads' states. A process is dead only when every thread of it is: a
    zombie's status is its first thread's, and a process whose first thread exited (SYS_exit) while others run reads
    "zombie" with those threads still on a CPU."""
    found = []
    for proc in procs:
        states = _thread_states(proc.pid)
        if any(state not in _DEAD for state in states):
            found.append((proc, states))
    return found


_DEAD = frozenset("ZX")  # /proc/<pid>/task/<tid>/stat's states of a thread that has exited
_STOPPED = frozenset("Tt") | _DEAD


def _thread_states(pid: int) -> list[str]:
    """Each thread's state letter from /proc/<pid>/task/<tid>/stat (R, S, D, T, t, Z, X...): empty once it is gone."""
    states = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return states
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as stat:
                states.append(stat.read().rsplit(")", 1)[1].split()[0])  # the name before it may hold spaces
        except (OSError, IndexError):
            continue
    return states


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _kill_tree(pids: list[int]) -> None:
    if os.getpid() == 1:  # under bwrap: everything in the namespace but the zygote, orphans included
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return
    for pid in pids:
        for proc in _tree(pid):
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _freeze(pid: int, stop: bool) -> bool:
    """SIGSTOP (or SIGCONT) every process of the job, and with SIGSTOP wait until each is stopped, again for any
    the job forked meanwhile: when this returns True nothing of the job runs on a CPU. False: after the deadline some
    process still ran (a job that forks faster than it can be frozen), which the parent must not take for stopped."""
    sig = signal.SIGSTOP if stop else signal.SIGCONT
    seen: set[int] = set()
    deadline = time.monotonic() + 2.0
    while True:
        # Each thread's state read once per scan: where the scan signals no new process, they are the states after
        # every signal sent, and where it does, another scan follows anyway.
        procs = [(p, states) for p, states in _live_threads(_job_processes(pid, dead_too=True)) if p.pid != os.getpid()]
        fresh = [p for p, _ in procs if p.pid not in seen]
        for proc in fresh:
            try:
                os.kill(proc.pid, sig)  # the whole thread group, even where its first thread is a zombie
            except ProcessLookupError:
                pass
            seen.add(proc.pid)
        if not stop:
            return True
        # Stopped means every thread: a process's own status is only its first thread's.
        running = [p for p, states in procs if any(state not in _STOPPED for state in states)]
        if not fresh and not running:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)


def _obey(control: list[int], pid: int, timeout: float, count_cpu: bool = False) -> None:
    """Wait up to `timeout` for the parent's stop ("S") or resume ("C") and carry it out, acknowledging it."""
    ready, _, _ = select.select([control[0]], [], [], timeout)
    if not ready:
        return
    try:
        words = os.read(control[0], 64)
    except OSError:
        words = b""
    if not words:
        control.clear()  # the parent closed its end: plain polling from now on
        time.sleep(timeout)
        return
    for word in words:
        stop = word == ord("S")
        frozen = _freeze(pid, stop)
        try:
            # With the stop, whether every process is stopped, and the job's CPU time so far (frozen, none of its
            # processes can add to it or reap another). Only CPU verdicts use the time: a GPU job's stop, on every
            # round's path, is spared the walk over /proc (NaN).
            cpu = job_cpu_seconds(pid) if count_cpu else math.nan
            os.write(control[1], b"s" + STOP_FIGURES.pack(cpu, frozen) if stop else b"c")
        except OSError:
            pass


def job_cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) of the job so far. Where the sandbox has a cgroup (cpu_cgroup.py), its usage
    less the zygote's own: every task that ever ran there, however it ended. Else every process of the job, zombies
    included, with each one's reaped children, which misses a child reaped by the kernel (its parent ignored SIGCHLD)
    or by the zygote (an orphan). The parent weighs the figure's growth over each batch against the batch's wall time
    (agent/engine/evaluate/cpu_share.py); only growth matters, so the sandbox's earlier jobs in the cgroup's figure
    change nothing."""
    cgroup = os.environ.get(cpu_cgroup.CGROUP_VARIABLE)
    if cgroup:
        zygote = cpu_cgroup.own_seconds()
        used = cpu_cgroup.usage_seconds(cgroup)
        return used - zygote if used is not None else math.nan  # unreadable now: no figure, never a smaller one
    procs = psutil.Process().children(recursive=True) if os.getpid() == 1 else _tree(pid)
    total = 0.0
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        # /proc/<pid>/stat's figures are sampled in 10 ms ticks per process (a zombie of 7.7 ms read 0); each
        # thread's schedstat is exact (nanoseconds), zombies' too, but leaves out threads that have exited, which
        # the ticks hold. The larger of the two, and the reaped children's time (their sum, in ticks).
        total += max(t.user + t.system, _threads_seconds(proc.pid)) + t.children_user + t.children_system
    return total


def _threads_seconds(pid: int) -> float:
    """The run time of every live (or zombie) thread of `pid`, from /proc/<pid>/task/*/schedstat, in seconds."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                total += int(stat.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


def _supervise(pid: int, status_r: int, limits: Limits, control: list[int] | None = None,
               count_cpu: bool = False) -> dict[str, Any]:
    """Wait for C0 while enforcing wall time, memory and process count on the whole tree, and obeying the
    parent's stop and resume words on `control` (client.JobControl; `count_cpu`: each stop reads the job's CPU
    time)."""
    control = list(control or [])
    started = time.monotonic()
    deadline = started + limits.wall_seconds
    buffer, reports = b"", []
    os.set_blocking(status_r, False)
    killed, peak_rss, polls = None, 0, 0
    while True:
        try:
            chunk = os.read(status_r, 4096)
            buffer += chunk
        except BlockingIOError:
            pass
        *lines, buffer = buffer.split(b"\n")
        reports.extend(json.loads(line) for line in lines if line)
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        polls += 1
        if killed is None and time.monotonic() > deadline:
            killed = "wall_time"
        elif killed is None and polls % _WATCH_EVERY == 0:
            procs = _job_processes(pid, dead_too=True)
            rss = 0
            for proc in procs:
                try:
                    rss += proc.memory_info().rss
                except psutil.NoSuchProcess:  # a zombie's too: it has no memory left
                    pass
            peak_rss = max(peak_rss, rss)
            if rss > limits.memory_bytes:
                killed = "memory"
            elif len(procs) > limits.processes:
                killed = "processes"
        if killed:
            inner = [r["pid"] for r in reports if "pid" in r]
            _freeze(pid, stop=False)  # a stopped process dies of SIGKILL too, but let none linger stopped
            _kill_tree([*inner, pid])
        if control:
            _obey(control, pid, _POLL_SECONDS, count_cpu)
        else:
            time.sleep(_POLL_SECONDS)
    try:
        buffer += os.read(status_r, 4096)
    except BlockingIOError:
        pass
    reports.extend(json.loads(line) for line in buffer.split(b"\n") if line)
    os.close(status_r)
    info: dict[str, Any] = {"killed": killed, "seconds": time.monotonic() - started, "peak_rss": peak_rss}
    for report in reports:
        info.update(report)
    inner_pid = info.get("pid")
    if os.getpid() == 1:
        _clear_namespace()  # whatever the job left behind dies with it, and is gone before the next job
    elif inner_pid:
        _kill_tree([inner_pid])  # whatever the job left behind dies with it
    status = info.get("status")
    if status is None:
        info["exit_code"], info["signal"] = None, signal.SIGKILL if killed else None
    elif os.WIFSIGNALED(status):
        info["exit_code"], info["signal"] = None, os.WTERMSIG(status)
    else:
        info["exit_code"], info["signal"] = os.WEXITSTATUS(status), None
    return info


def serve(sock: socket.socket, job_signals: dict[int, Any] | None = None) -> None:
    """Run each job the client sends; `job_signals`: the signals' actions each job starts with (deaf_to_signals)."""
    import torch  # noqa: F401 - the point of the zygote: children inherit an imported torch

    while True:
        try:
            request, fds = recv_message(sock, maxfds=_MAX_FDS)
        except EOFError:
            return
        if torch.cuda.is_initialized():  # our bug, never the candidate's: children would inherit it
            raise RuntimeError("the zygote initialised CUDA; forked children could not use the GPU")
        control: list[int] = []
        if request.get("control"):  # the parent's stop/resume pipes: the zygote's, never the job's
            control, fds = fds[3:5], fds[:3] + fds[5:]
        status_r, status_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                sock.close()
                os.close(status_r)
                for fd in control:
                    os.close(fd)
                _first_child(request, fds, status_w, job_signals or {})
            finally:
                os._exit(71)
        os.close(status_w)
        for fd in fds:
            os.close(fd)
        try:
            info = _supervise(pid, status_r, request["limits"], control, count_cpu=request["device"] == "cpu")
        finally:
            for fd in control:
                os.close(fd)
        _reap_orphans()
        send_message(sock, info)


def _clear_namespace(seconds: float = 10.0) -> None:
    """Under bwrap (the zygote is pid 1): kill every other process in the namespace and reap them all,
    so that none is counted against, or shares the namespace with, the next job."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return  # no process left but the zygote
        time.sleep(0.01)


def _reap_orphans() -> None:
    """Under bwrap the zygote is pid 1 of its namespace: a job's processes orphaned by the kill come to
    it, and would stay zombies."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _forks_can_use_cuda() -> bool:
    """Torch marks forks "bad" for CUDA once the parent asked the driver anything; check in a
    throwaway child, since the flag is only visible after a fork."""
    import torch

    pid = os.fork()
    if pid == 0:
        os._exit(1 if torch.cuda._is_in_bad_fork() else 0)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def main() -> None:
    fd = int(sys.argv[1])
    preload = sys.argv[2:]
    started = time.monotonic()
    # Die with the client: an orphaned zygote would hold a GPU worker's memory forever.
    isolation._libc.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # Not dumpable: no job may read this process's memory or environment through /proc, or ptrace it
    # (under bwrap a job shares the zygote's /proc when the kernel refuses it a private one).
    isolation._libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
    sock = socket.socket(fileno=fd)
    import torch  # noqa: F401

    for name in preload:
        importlib.import_module(name)
    if not _forks_can_use_cuda():
        send_message(sock, {"ready": False, "error": "a preloaded module touched CUDA (e.g. torch.cuda.is_available()), "
                            f"so forked children could not use the GPU; preloads: {preload}"})
        return
    # Last, once nothing more is imported (a module may install a handler of its own): no job runs before this.
    job_signals = deaf_to_signals()
    send_message(sock, {"ready": True, "pid": os.getpid(), "import_seconds": time.monotonic() - started})
    serve(sock, job_signals)


if __name__ == "__main__":
    main()
