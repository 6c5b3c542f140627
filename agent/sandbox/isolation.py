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

MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
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


def enter_namespaces() -> None:
    """Unshare user/mount/pid/net/ipc namespaces. The caller must fork once more afterwards:
    only children of this process live in the new pid namespace."""
    uid, gid = os.getuid(), os.getgid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"0 {gid} 1")


def finish_inside_namespace(private_tmp: bool = True, keep: tuple[str, ...] = ()) -> None:
    """In the pid namespace's first process: mount a /proc that shows only this sandbox, an empty
    /tmp (into which the directories in `keep` that live under /tmp are bound back, e.g. the
    shared build cache), then give up every capability so the candidate cannot undo the mounts."""
    _check(_libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0), "prctl(PDEATHSIG)")
    _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")
    _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
    if private_tmp:
        # Open the kept directories before the tmpfs hides them, then bind them back by fd.
        held = []
        for path in keep:
            real = os.path.realpath(path)
            if real.startswith("/tmp/") and os.path.isdir(real):
                held.append((real, os.open(real, os.O_RDONLY | os.O_DIRECTORY)))
        _check(_libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1g"), "mount /tmp")
        for real, fd in held:
            os.makedirs(real, exist_ok=True)
            _check(_libc.mount(f"/proc/self/fd/{fd}".encode(), real.encode(), None, MS_BIND | MS_REC, None),
                   f"bind {real}")
            os.close(fd)
    drop_privileges()


def drop_privileges() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(NO_NEW_PRIVS)")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")
