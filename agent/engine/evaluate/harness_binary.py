"""The harness's own native modules (the ATen observer, the kernel census): compiled on the trusted side into the build
cache, and loaded in a job before the candidate's import only where their bytes are the ones the parent built."""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.engine.build.cache import BuildCache
from agent.engine.evaluate.loader import cache_root_from


def built(cache_root: str | os.PathLike[str] | None, key: str, file: str,
          compile_into: Callable[[Path], dict[str, str]]) -> dict[str, str]:
    """Trusted side: the module's binary in the build cache (compiled once per key), as what a job needs to load it
    and check it: the entry's key, the file and its sha256."""
    cache = BuildCache(cache_root_from(str(cache_root) if cache_root else None))
    entry, _ = cache.get_or_build(key, compile_into)
    if cache.verify(key):  # changed since it was installed: built afresh
        cache.evict(key)
        entry, _ = cache.get_or_build(key, compile_into)
    digest = hashlib.sha256(cache.read_verified(entry, file)).hexdigest()
    return {"key": key, "file": file, "sha256": digest}


def load(described: dict[str, Any], cache_root: str | None, module_name: str, what: str) -> Any:
    """In a job: the module the parent built (`described`, from built()), its bytes checked against the parent's sha256
    and copied to the job's private directory first, so that the bytes checked are the ones loaded."""
    cache = BuildCache(cache_root_from(cache_root), read_only=True)
    entry = cache.lookup(str(described["key"]))
    if entry is None:
        raise RuntimeError(f"{what} is missing from the build cache")
    file = str(described["file"])
    data = cache.read_verified(entry, file)
    if hashlib.sha256(data).hexdigest() != described["sha256"]:
        raise RuntimeError(f"{what} in the build cache is not the one the parent built")
    private = Path(tempfile.mkdtemp(prefix=module_name + "-"))  # the job's own TMPDIR (jobs.setup_device)
    path = private / file
    path.write_bytes(data)
    loader = importlib.machinery.ExtensionFileLoader(module_name, str(path))
    spec = importlib.util.spec_from_file_location(module_name, path, loader=loader)
    if spec is None:
        raise RuntimeError(f"{what} could not be loaded")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    sys.modules.pop(module_name, None)  # not left where a lookup by name finds it
    return module
