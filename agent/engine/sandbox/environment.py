"""What a sandboxed process may see of the studio's environment: an allow-list, never a deny-list.

The studio's processes hold secrets in their environment (SECRET_KEY, DATABASE_URL with its password,
REDIS_URL, model API keys). The zygote is started with this filtered environment, so neither the
zygote's memory nor a child's /proc/self/environ (the exec-time block, which os.environ.clear() does
not erase) holds them; each job's environment is filtered again.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

# Names a compiler, CUDA or torch needs, and the studio's own cache locations.
ALLOWED = frozenset({
    "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
    "KSTUDIO_CACHE_DIR", "KSTUDIO_CUDA_ARCH", "TORCH_EXTENSIONS_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
    "KSTUDIO_JOB_ROOT", "KSTUDIO_PRIVATE_DIR", "KSTUDIO_TRUSTED_DIR",
    "TORCH_CUDA_ARCH_LIST", "CC", "CXX", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED",
    "KSTUDIO_BATCH_PARTS",  # diagnostics: each batch's device time by part (evaluate/batch.py)
})
# Directories shared between jobs (caches): visible to every job, READ-ONLY (kept visible even when they
# live under /tmp). Only the trusted side writes them (agent/engine/build/cache.py installs; docs/threat-model.md).
SHARED_DIRS = ("KSTUDIO_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR")
# The host directory under which the trusted parent creates one private directory per job that needs to
# hand files back (a build's output). Bound read-write into the sandbox, but each job sees only its own
# directory in it (Job.private_dir), named to it by PRIVATE_DIR_VARIABLE; a job given none sees it empty.
JOB_ROOT_VARIABLE = "KSTUDIO_JOB_ROOT"
PRIVATE_DIR_VARIABLE = "KSTUDIO_PRIVATE_DIR"
# State only the trusted parent reads and writes (compile baselines, candidate records): never bound into
# the sandbox, and hidden behind an empty tmpfs in a job where the host filesystem shows (no bwrap).
TRUSTED_DIR_VARIABLE = "KSTUDIO_TRUSTED_DIR"
# Set by the client in the zygote's environment: "bwrap" when it runs under bubblewrap, else "none".
WALL_VARIABLE = "KSTUDIO_SANDBOX_WALL"
# Even an allowed-looking name is dropped when it reads like a credential (a CUDA_*_TOKEN set by a
# cluster, say): the allow-list decides, this is a second line.
_SECRET_NAME = re.compile(r"SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|CREDENTIAL|_URL$|^DATABASE|^REDIS", re.IGNORECASE)


def allowed(name: str) -> bool:
    return name in ALLOWED and not _SECRET_NAME.search(name)


def sandbox_environment(source: Mapping[str, str], **fixed: str) -> dict[str, str]:
    """The allowed entries of `source`, with HOME and TMPDIR pointing at the private /tmp, then `fixed`
    (values the sandbox itself sets, such as PYTHONPATH to our own package)."""
    env = {name: value for name, value in source.items() if allowed(name)}
    env.update(HOME="/tmp", TMPDIR="/tmp")
    env.update(fixed)
    return env
