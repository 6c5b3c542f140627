"""The outer wall: the zygote itself runs under bubblewrap (Debian's `bubblewrap` package).

bwrap gives the zygote, and so every job it forks, a root filesystem made only of what a job needs:
the system directories and the Python environment read-only, our `agent` package read-only, the
shared build caches read-write, an empty tmpfs /tmp, a minimal /dev plus the NVIDIA device nodes, no
network, an empty environment plus an allow-list (environment.py). Nothing else of the host is
mounted: not the studio's checkout (its var/ with the secret key and the SQLite database, its .env,
uploads), not /root or /home, not the host's /tmp. Inside, the zygote still forks each job into its
own user, pid, net, mount and IPC namespaces with a private /tmp (isolation.py): bwrap walls the
studio off from jobs, the inner namespaces wall jobs off from each other and from the zygote.

Where bwrap is missing or cannot create namespaces, the sandbox falls back to the inner layer alone
and says so loudly (a logged warning and the isolation level every verdict records).
"""
from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable

# System directories every job may read. /etc is needed for the loader cache, compilers' alternatives
# and locales; the files below are masked inside it (a studio run as root would otherwise read them).
_SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/sys")
_TOP_LEVEL_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_MASKED_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
_MASKED_DIRS = ("/etc/ssh", "/etc/ssl/private")


@functools.lru_cache(maxsize=1)
def usable() -> tuple[str | None, str]:
    """(path to bwrap, "") when it exists and can create its namespaces here, else (None, why not)."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bubblewrap is not installed (Debian package `bubblewrap`; `make` installs it as root)"
    probe = [path, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap at {path} could not be run: {exc}"
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
        return None, f"bubblewrap at {path} cannot create namespaces on this host: {reason}"
    return path, ""


def command(bwrap: str, argv: list[str], env: dict[str, str], *, readable: Iterable[str] = (),
            writable: Iterable[str] = (), cwd: str = "/tmp") -> list[str]:
    """bwrap's command line running `argv` with environment `env` (nothing else inherited), the
    directories in `readable` bound read-only and those in `writable` read-write, at their own paths."""
    args = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv"]
    for name, value in sorted(env.items()):
        args += ["--setenv", name, value]
    for path in _SYSTEM_DIRS:
        if os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _TOP_LEVEL_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _MASKED_FILES:
        if os.path.isfile(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in _MASKED_DIRS:
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
    args += ["--proc", "/proc", "--dev", "/dev"]
    for node in gpu_device_nodes():
        args += ["--dev-bind", node, node]
    # /tmp first: binds that live under /tmp (a CI checkout, a test's cache) are mounted on top of it.
    args += ["--tmpfs", "/tmp"]
    for path in _distinct(readable, skip_system=True):
        args += ["--ro-bind", path, path]
    for path in _distinct(writable, skip_system=False):
        args += ["--bind", path, path]
    # bwrap builds the new root on a tmpfs: read-only, or a job could leave files there for the next.
    return [*args, "--remount-ro", "/", "--chdir", cwd, "--", *argv]


def gpu_device_nodes() -> list[str]:
    """The NVIDIA nodes CUDA opens: the control and UVM nodes and one per GPU (CUDA_VISIBLE_DEVICES picks
    among them; its indices do not name nodes, so all GPUs' nodes are bound)."""
    return sorted(p for p in glob.glob("/dev/nvidia*") if os.path.exists(p))


def python_paths() -> list[str]:
    """The interpreter and the environment running it (a virtualenv and the Python it was made from)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    return sorted(paths)


def _distinct(paths: Iterable[str], skip_system: bool) -> list[str]:
    """Existing paths, each once, as given and resolved (bwrap binds the target of a link), parents
    before children; read-only ones already inside a system directory are bound with it."""
    seen: set[str] = set()
    for path in paths:
        for candidate in (path, os.path.realpath(path)):
            if candidate and os.path.exists(candidate) and not (skip_system and _under_system(candidate)):
                seen.add(os.path.abspath(candidate))
    ordered = sorted(seen, key=lambda p: (p.count("/"), p))
    # A path inside another one already bound comes with it.
    return [p for p in ordered if not any(p.startswith(q.rstrip("/") + "/") for q in ordered if q != p)]


def _under_system(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in _SYSTEM_DIRS)
