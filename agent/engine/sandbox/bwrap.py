"""The outer wall: the zygote itself runs under bubblewrap (Debian's `bubblewrap` package).

bwrap gives the zygote, and so every job it forks, a root filesystem made only of what a job needs:
the system directories and the Python environment read-only, our `agent` package read-only, the
shared build caches read-write, an empty tmpfs /tmp, a minimal /dev plus the NVIDIA device nodes of
the worker's own GPUs (those its CUDA_VISIBLE_DEVICES names, see select_gpus), no network, an empty environment plus an allow-list (environment.py). Nothing else of the host is
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
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass

log = logging.getLogger(__name__)

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
    directories in `readable` bound read-only and those in `writable` read-write, at their own paths.
    Only the device nodes of the GPUs `env`'s CUDA_VISIBLE_DEVICES names are bound, and the variable is
    rewritten to name the same GPUs inside (select_gpus)."""
    gpus = select_gpus(env.get("CUDA_VISIBLE_DEVICES"), env.get("CUDA_DEVICE_ORDER"))
    if gpus.warning:
        log.warning("SANDBOX GPU NODES: %s", gpus.warning)
    env = dict(env)
    if gpus.visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus.visible
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
    for node in gpus.nodes:
        args += ["--dev-bind", node, node]
    # /tmp first: binds that live under /tmp (a CI checkout, a test's cache) are mounted on top of it.
    args += ["--tmpfs", "/tmp"]
    for path in _distinct(readable, skip_system=True):
        args += ["--ro-bind", path, path]
    for path in _distinct(writable, skip_system=False):
        args += ["--bind", path, path]
    # bwrap builds the new root on a tmpfs: read-only, or a job could leave files there for the next.
    return [*args, "--remount-ro", "/", "--chdir", cwd, "--", *argv]


# ------------------------------------------------------------------------------------------------ GPUs
#
# CUDA_VISIBLE_DEVICES names GPUs by CUDA index, by UUID ("GPU-" and a unique prefix of the rest) or by MIG
# id; a device node is named by the driver's minor number, which is none of these. The driver's
# /proc/driver/nvidia/gpus/<bus>/information gives each GPU's "Device Minor", "Bus Location" and "GPU UUID".
# What the mapping assumes (CUDA's documentation and its observed behaviour; the two-GPU test checks it):
# - CUDA enumerates only the GPUs whose /dev/nvidiaN node it can open (nvidia-docker 1 isolated GPUs this
#   way), so the GPUs an index counts are those the driver lists that have a node under /dev.
# - CUDA_DEVICE_ORDER=PCI_BUS_ID: index i is the i-th of them in PCI bus order. The default FASTEST_FIRST
#   ranks by a speed heuristic and keeps PCI order between equals: on a host whose GPUs are all one model
#   that is PCI order too; on a mixed host an index cannot be mapped here (name GPUs by UUID or set
#   CUDA_DEVICE_ORDER=PCI_BUS_ID) and every GPU's node is bound, with a warning.
# - As in CUDA, the list ends at the first entry that names no GPU; a GPU named twice counts once.
# - "MIG-GPU-<uuid>/<gi>/<ci>" is on the GPU of that UUID; "MIG-<uuid>" does not say which GPU it is on
#   (only NVML knows), so every GPU's node is bound, with a warning. MIG ids need /dev/nvidia-caps.
# Inside, CUDA_VISIBLE_DEVICES names the same GPUs by UUID in the same order (a UUID does not depend on
# which GPUs CUDA enumerates); where the driver did not report a chosen GPU's UUID, by its rank among the
# bound GPUs in the same order. MIG ids are passed as they are.

_SHARED_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
_BUS = re.compile(r"^([0-9a-f]+):([0-9a-f]+):([0-9a-f]+)\.([0-9a-f]+)$")


@dataclass(frozen=True)
class Gpu:
    """One GPU as the driver's /proc/driver/nvidia/gpus/<bus>/information describes it."""

    minor: int
    bus: str  # PCI location, "0000:18:00.0"
    uuid: str  # "GPU-...", or "" where the driver did not report it
    model: str

    @property
    def pci_order(self) -> tuple[int, ...]:
        return tuple(int(part, 16) for part in _BUS.match(self.bus).groups())  # type: ignore[union-attr]


@dataclass(frozen=True)
class GpuSelection:
    nodes: list[str]
    """Device nodes to bind: the shared ones and those of the chosen GPUs."""
    visible: str | None
    """CUDA_VISIBLE_DEVICES inside the sandbox (None: left unset)."""
    warning: str = ""
    """Why every GPU's node is bound although CUDA_VISIBLE_DEVICES names fewer ("" when it is not)."""


class _Unmapped(Exception):
    """CUDA_VISIBLE_DEVICES cannot be mapped to device nodes here (the message says why)."""


def installed_gpus(proc_root: str = "/proc", dev_root: str = "/dev") -> list[Gpu]:
    """The GPUs the driver lists that have a device node under `dev_root`, in PCI bus order."""
    gpus = []
    for path in glob.glob(os.path.join(proc_root, "driver", "nvidia", "gpus", "*", "information")):
        try:
            with open(path) as f:
                fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        except OSError as exc:
            raise _Unmapped(f"{path} cannot be read: {exc}") from exc
        fields = {name.strip(): value.strip() for name, value in fields.items()}
        bus = fields.get("Bus Location", os.path.basename(os.path.dirname(path))).lower()
        if not fields.get("Device Minor", "").isdigit() or not _BUS.match(bus):
            raise _Unmapped(f"{path} has no Device Minor or Bus Location this code can read")
        uuid = fields.get("GPU UUID", "")
        gpu = Gpu(int(fields["Device Minor"]), bus, uuid if uuid.startswith("GPU-") and "?" not in uuid else "",
                  fields.get("Model", ""))
        if os.path.exists(os.path.join(dev_root, f"nvidia{gpu.minor}")):
            gpus.append(gpu)
    return sorted(gpus, key=lambda g: g.pci_order)


def select_gpus(visible: str | None, order: str | None = None, *, proc_root: str = "/proc",
                dev_root: str = "/dev") -> GpuSelection:
    """The device nodes a sandbox started with CUDA_VISIBLE_DEVICES=`visible` and CUDA_DEVICE_ORDER=`order`
    gets, and the CUDA_VISIBLE_DEVICES that names the same GPUs inside it (the assumptions are above)."""
    shared = [os.path.join(dev_root, name) for name in _SHARED_NODES if os.path.exists(os.path.join(dev_root, name))]
    caps = [os.path.join(dev_root, "nvidia-caps")] if os.path.isdir(os.path.join(dev_root, "nvidia-caps")) else []
    every = sorted(p for p in glob.glob(os.path.join(dev_root, "nvidia*")) if re.fullmatch(r"nvidia\d+", os.path.basename(p)))
    if visible is None:  # unset: every GPU, as CUDA itself would see them
        return GpuSelection(sorted(shared + every + caps), None)
    try:
        gpus = installed_gpus(proc_root, dev_root)
        if every and not gpus:
            raise _Unmapped(f"{proc_root}/driver/nvidia/gpus lists none of the GPUs in {dev_root}")
        chosen = _chosen(visible, order, gpus)
    except _Unmapped as exc:
        return GpuSelection(sorted(shared + every + caps), visible,
                            f"CUDA_VISIBLE_DEVICES={visible!r} cannot be mapped to device nodes ({exc}): every "
                            "GPU's node is bound and jobs are not kept off the other GPUs")
    if not chosen:
        return GpuSelection([], "")
    plain = [c for c in chosen if isinstance(c, Gpu)]
    migs = [c for c in chosen if not isinstance(c, Gpu)]
    nodes = {*shared, *(os.path.join(dev_root, f"nvidia{g.minor}") for g in [*plain, *(m[0] for m in migs)]),
             *(caps if migs else [])}
    bound = sorted({g.minor: g for g in [*plain, *(m[0] for m in migs)]}.values(), key=lambda g: g.pci_order)
    if all(g.uuid for g in plain):
        inside = [c.uuid if isinstance(c, Gpu) else c[1] for c in chosen]
    else:
        inside = [str(bound.index(c)) if isinstance(c, Gpu) else c[1] for c in chosen]
    return GpuSelection(sorted(nodes), ",".join(inside))


def _chosen(visible: str, order: str | None, gpus: list[Gpu]) -> list[Gpu | tuple[Gpu, str]]:
    """What CUDA_VISIBLE_DEVICES names, in its order: a GPU, or (its GPU, the MIG id) for a MIG instance."""
    chosen: list[Gpu | tuple[Gpu, str]] = []
    for entry in (e.strip() for e in visible.split(",")):
        mig = entry.upper().startswith("MIG-")
        name = entry[4:].split("/")[0] if mig else entry
        if mig and not name.upper().startswith("GPU-"):
            raise _Unmapped(f"{entry} does not say which GPU it is on")
        if name.upper().startswith("GPU-"):
            matches = [g for g in gpus if g.uuid and g.uuid.lower().startswith(name.lower())]
            gpu = matches[0] if len(matches) == 1 else None
        elif entry.isdigit():
            if order != "PCI_BUS_ID" and len({g.model for g in gpus}) > 1:
                raise _Unmapped(f"GPUs of different models ({', '.join(sorted({g.model for g in gpus}))}) in CUDA's "
                                "FASTEST_FIRST order: name them by UUID (nvidia-smi -L) or set CUDA_DEVICE_ORDER=PCI_BUS_ID")
            gpu = gpus[int(entry)] if int(entry) < len(gpus) else None
        else:
            gpu = None
        if gpu is None:
            break
        item: Gpu | tuple[Gpu, str] = (gpu, entry) if mig else gpu
        if item not in chosen:
            chosen.append(item)
    return chosen


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
