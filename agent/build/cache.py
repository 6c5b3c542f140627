"""A content-addressed directory of build outputs, shared by every worker process on a host.

Layout: `<root>/<key[:2]>/<key>/` holds one finished entry (its files plus `meta.json`); an entry
appears in one atomic rename, so a directory that exists is complete. Next to it, `<key>.lock`
serialises builders of that key, and `.<key>.*.tmp/` directories are builds in progress.

Correctness rests on the rename, not on the lock: where locks do not reach (two hosts on a network
filesystem without lock support), both hosts build and the second rename loses to the first, whose
entry is then used. The lock only saves the duplicate work.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from filelock import FileLock

META = "meta.json"
# A temp dir this old belongs to a builder that died (builds take seconds to minutes).
STALE_TMP_SECONDS = 3600.0


def default_cache_root() -> Path:
    """$KSTUDIO_CACHE_DIR, else `<checkout>/.cache/kstudio` in a source checkout, else `~/.cache/kstudio`.

    A checkout keeps its cache beside it (git-ignored, removed by `make clean`); an installed package
    uses the user's cache directory ($XDG_CACHE_HOME) since site-packages may be read-only.
    """
    configured = os.environ.get("KSTUDIO_CACHE_DIR")
    if configured:
        return Path(configured)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache" / "kstudio"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kstudio"


class BuildCache:
    def __init__(self, root: Path, lock_timeout: float = 1800.0) -> None:
        self.root = Path(root)
        # A waiter gives up after this long; a dead holder's lock is released by the kernel at once.
        self.lock_timeout = lock_timeout

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lookup(self, key: str) -> Path | None:
        entry = self.entry_dir(key)
        return entry if (entry / META).is_file() else None

    def meta(self, key: str) -> dict[str, object]:
        return json.loads((self.entry_dir(key) / META).read_text())

    def get_or_build(
        self, key: str, build: Callable[[Path], Mapping[str, object] | None]
    ) -> tuple[Path, bool]:
        """The entry for `key` and whether it already existed, calling `build(tmp_dir)` if it did not.

        `build` fills the directory it is given and may return a description of what it built, which
        is stored under "built" in meta.json. If it raises, nothing is stored and the error propagates.
        """
        found = self.lookup(key)
        if found is not None:
            return found, True
        entry = self.entry_dir(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(entry.parent / f"{key}.lock", timeout=self.lock_timeout):
            # Whoever held the lock before us may have just built it.
            found = self.lookup(key)
            if found is not None:
                return found, True
            self._remove_leftovers(key)
            return self._build(key, build), False

    def _build(self, key: str, build: Callable[[Path], Mapping[str, object] | None]) -> Path:
        entry = self.entry_dir(key)
        # Next to the entry, so that the final rename stays on one filesystem and is atomic.
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=entry.parent))
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the entry from sandboxed readers
        started = time.time()
        try:
            built = build(tmp)
            meta = {
                "key": key,
                "created": started,
                "seconds": round(time.time() - started, 3),
                "built": dict(built or {}),
            }
            (tmp / META).write_text(json.dumps(meta, indent=1, sort_keys=True))
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.rename(tmp, entry)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if self.lookup(key) is None:
                raise
            # Another host (beyond our lock's reach) renamed its identical build into place first.
        return entry

    def _remove_leftovers(self, key: str) -> None:
        """Drop what a killed builder left: a half-written entry without meta, old temp dirs."""
        entry = self.entry_dir(key)
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        for tmp in entry.parent.glob(f".{key}.*.tmp"):
            if time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                shutil.rmtree(tmp, ignore_errors=True)
