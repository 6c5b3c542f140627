"""Namespaces for a sandboxed child: no network, its own process table, a private /tmp.

Applied in a freshly forked (hence single-threaded) child. Measured on this project's hosts and the
H100 box: user, mount, pid, net and IPC namespaces work unprivileged and CUDA runs inside them.
Where the kernel refuses (some container runtimes), the child continues with rlimits only and the
verdict records the isolation level it actually got.
"""
from __future__ import annotations

import ctypes
import os

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_RELATIME = 1 << 21
# statvfs f_flag bits -> the mount flags a remount must repeat (in a user namespace the kernel refuses
# to clear a flag the outer mount has locked: nosuid, nodev, noexec, the atime ones).
_KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
               (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def enter_namespaces(pid_namespace: bool = True) -> None:
    """Unshare user/mount/(pid)/net/ipc namespaces. The caller must fork once more afterwards:
    only children of this process live in a new pid namespace."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | (CLONE_NEWPID if pid_namespace else 0)
    _check(_libc.unshare(flags), "unshare")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"0 {gid} 1")


def finish_inside_namespace(hide: tuple[str, ...] = ("/tmp",), keep: tuple[str, ...] = (),
                            private_proc: bool = True, read_only: tuple[str, ...] = (), private_root: str = "",
                            private_dir: str | None = None) -> None:
    """In the pid namespace's first process: mount a /proc that shows only this sandbox (its sysctls
    read-only: a studio run as root would otherwise let a job write the host's), replace each directory
    in `hide` with an empty tmpfs into which the paths in `keep` that live there are bound back (the
    shared build cache, our code and Python), then give up every capability so the candidate cannot
    undo the mounts.

    Then each directory in `read_only` (the shared caches) is bound onto itself read-only, and
    `private_root` (the parent's directory of per-job output directories) is replaced by an empty tmpfs
    into which only `private_dir`, this job's own, is bound back read-write. The mounts are made while
    the namespace's capabilities are held and cannot be undone once they are dropped: a mount namespace
    made later from inside (a new user namespace) inherits them locked, read-only flag included.

    `private_proc` False keeps the /proc already there: under bubblewrap, whose own pid namespace and
    /proc show only the zygote (not dumpable) and the job (a new /proc is refused there when bwrap runs
    as root, and CUDA needs a /proc that matches the job's pids)."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl(PDEATHSIG)")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    if private_proc:
        _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        _check(_libc.mount(b"/proc/sys", b"/proc/sys", None, MS_BIND | MS_REC, None), "bind /proc/sys")
        _check(_libc.mount(None, b"/proc/sys", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                           None), "make /proc/sys read-only")
    for directory in hide:
        _replace_with_tmpfs(directory, keep)
    for directory in sorted(set(read_only), key=lambda p: p.count("/")):
        bind_read_only(directory)
    if private_root:
        _replace_with_tmpfs(private_root, (private_dir,) if private_dir else ())
    drop_privileges()


def bind_read_only(directory: str) -> None:
    """Bind `directory` onto itself, then remount that bind read-only (keeping the flags the kernel locks)."""
    real = os.path.realpath(directory)
    if not os.path.isdir(real):
        return
    _check(_libc.mount(real.encode(), real.encode(), None, MS_BIND | MS_REC, None), f"bind {real}")
    kept = os.statvfs(real).f_flag
    flags = MS_BIND | MS_REMOUNT | MS_RDONLY
    for bit, flag in _KEPT_FLAGS:
        if kept & bit:
            flags |= flag
    _check(_libc.mount(None, real.encode(), None, flags, None), f"make {real} read-only")


def _replace_with_tmpfs(directory: str, keep: tuple[str, ...]) -> None:
    """Open the kept paths under `directory` before the tmpfs hides them, then bind them back by fd."""
    if not os.path.isdir(directory):
        return
    held = []
    for path in sorted(set(keep), key=lambda p: p.count("/")):
        real = os.path.realpath(path)
        if real.startswith(directory.rstrip("/") + "/") and os.path.isdir(real):
            held.append((real, os.open(real, os.O_RDONLY | os.O_DIRECTORY)))
    _check(_libc.mount(b"tmpfs", directory.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1g"), f"mount {directory}")
    for real, fd in held:
        os.makedirs(real, exist_ok=True)
        _check(_libc.mount(f"/proc/self/fd/{fd}".encode(), real.encode(), None, MS_BIND | MS_REC, None), f"bind {real}")
        os.close(fd)


def drop_privileges() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
