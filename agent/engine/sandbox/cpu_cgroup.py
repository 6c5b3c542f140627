"""A sandbox's CPU time as the kernel keeps it for a cgroup: every task that ever ran there, however it ended.

Per-process figures lose time. A child whose parent ignores SIGCHLD (or sets SA_NOCLDWAIT) is reaped by the kernel,
and its CPU time reaches no one's children's figures; an orphan reaped by the zygote adds to the zygote's. A job could
hand its work to such processes and read as one thread while it ran on every core (docs/threat-model.md). A cgroup's
usage counts every task that was ever in it, so the trusted parent creates one per sandbox (where the host lets it),
starts the zygote inside it, and the zygote reads the cgroup's usage less its own CPU time: the jobs', all of them.

Jobs cannot leave it: under bubblewrap /sys is read-only, and without it the jobs are in a user namespace that does not
own the host's cgroups. Where no cgroup can be made (no writable cgroup file system), the zygote walks /proc as before
and each job's `isolation` says so.
"""
from __future__ import annotations

import itertools
import os
import resource
import subprocess

# The cgroup's directory, set by the trusted parent in the zygote's environment (never by a job).
CGROUP_VARIABLE = "KSTUDIO_CPU_CGROUP"
_names = itertools.count()


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of each cgroup mount, from /proc/self/mountinfo."""
    found = []
    try:
        with open("/proc/self/mountinfo") as info:
            for line in info:
                fields = line.split()
                sep = fields.index("-")
                kind, options = fields[sep + 1], fields[sep + 3] if len(fields) > sep + 3 else ""
                if kind in ("cgroup", "cgroup2"):
                    found.append((fields[4], kind, options))
    except (OSError, ValueError, IndexError):
        return []
    return found


def _own_path(version: str) -> str | None:
    """This process's cgroup path in the v1 cpuacct hierarchy ("1") or the unified one ("2"), from /proc/self/cgroup."""
    try:
        with open("/proc/self/cgroup") as groups:
            for line in groups:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if version == "2" and controllers == "":
                    return path
                if version == "1" and "cpuacct" in controllers.split(","):
                    return path
    except (OSError, ValueError):
        return None
    return None


def usage_file(directory: str) -> str:
    """The file of `directory`'s cumulative CPU time: cpuacct.usage (v1, ns) or cpu.stat (v2, usage_usec)."""
    v1 = os.path.join(directory, "cpuacct.usage")
    return v1 if os.path.exists(v1) else os.path.join(directory, "cpu.stat")


def create() -> str | None:
    """A fresh cgroup for one sandbox, beside this process's own (v1 cpuacct, else v2); None where none can be made."""
    for mount, kind, options in _mounts():
        if kind == "cgroup" and "cpuacct" not in options.split(","):
            continue
        own = _own_path("1" if kind == "cgroup" else "2")
        if own is None:
            continue
        parent = os.path.join(mount, own.lstrip("/"))
        _remove_stale(parent)
        directory = os.path.join(parent, f"kstudio-{os.getpid()}-{next(_names)}")
        try:
            os.mkdir(directory, 0o755)
        except OSError:
            continue
        # A process can be moved in (a v2 parent with domain controllers enabled, say, refuses) and the usage read.
        moved = subprocess.run(enter_command(directory, ["/bin/sh", "-c", ":"]), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={}, check=False)
        if moved.returncode == 0 and usage_seconds(directory) is not None:
            return directory
        remove(directory)
    return None


def _remove_stale(parent: str) -> None:
    """Empty cgroups of studio processes that are gone (one killed before its sandboxes closed)."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        owner = name.split("-")
        if len(owner) == 3 and owner[0] == "kstudio" and owner[1].isdigit() and not os.path.exists(f"/proc/{owner[1]}"):
            remove(os.path.join(parent, name))


def holds(directory: str, pid: int) -> bool:
    """Whether process `pid` (this process's pid namespace) is in the cgroup."""
    try:
        with open(os.path.join(directory, "cgroup.procs")) as procs:
            return str(pid) in procs.read().split()
    except OSError:
        return False


def remove(directory: str) -> None:
    """Remove the cgroup once its processes are gone (the kernel refuses while any is left: then it stays)."""
    try:
        os.rmdir(directory)
    except OSError:
        pass


def usage_seconds(directory: str) -> float | None:
    """The cgroup's CPU time so far (user and system, every task it ever held), or None where it cannot be read."""
    path = usage_file(directory)
    try:
        with open(path) as usage:
            text = usage.read()
    except OSError:
        return None
    try:
        if path.endswith("cpuacct.usage"):
            return int(text.strip()) / 1e9
        for line in text.splitlines():
            name, value = line.split()
            if name == "usage_usec":
                return int(value) / 1e6
    except ValueError:
        return None
    return None


def own_seconds() -> float:
    """This process's own CPU time, every thread of it (the zygote's, which its cgroup holds beside the jobs)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def enter_command(directory: str, argv: list[str]) -> list[str]:
    """`argv` started inside the cgroup: a shell moves itself in, then execs it, so nothing it forks starts outside."""
    return ["/bin/sh", "-c", 'echo 0 > "$0/cgroup.procs" && exec "$@"', directory, *argv]
