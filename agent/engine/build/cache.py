"""A content-addressed directory of build outputs, shared by every worker process on a host.

Layout: `<root>/<key[:2]>/<key>/` holds one finished entry (its files plus `meta.json`); an entry
appears in one atomic rename, so a directory that exists is complete. Next to it, `<key>.lock`
serialises builders of that key, and `.<key>.*.tmp/` directories are builds in progress.

Trust (docs/threat-model.md, "Caches"): only the trusted side writes here. Sandboxed jobs see the root
read-only; a build runs in a sandboxed job that writes into a private directory, and the parent
`install()`s what it finds there under the key IT computed, after checking the files (regular, no links,
bounded) and recording each file's sha256 in `meta.json` ("files"). Readers take bytes through
`read_verified()`, which refuses a file whose hash differs from the manifest's; an entry without a
manifest (written by an older version, when jobs could write here) is not an entry. A `read_only` cache
(what a job gets) never writes: a miss is built into the job's private directory and used from there.

Correctness rests on the rename, not on the lock: where locks do not reach (two hosts on a network
filesystem without lock support), both hosts build and the second rename loses to the first, whose
entry is then used. The lock only saves the duplicate work.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from filelock import FileLock

META = "meta.json"
# A temp dir this old belongs to a builder that died (builds take seconds to minutes).
STALE_TMP_SECONDS = 3600.0
# Bounds on what one entry may hold (a build's output comes from a sandboxed job: untrusted data).
MAX_ENTRY_FILES = 32
MAX_ENTRY_BYTES = 1 << 30
# meta.json's "format": 2 entries carry the "files" manifest.
ENTRY_FORMAT = 2


class CacheIntegrityError(Exception):
    """A cached file's bytes do not match the sha256 its entry's manifest recorded (or it has no manifest)."""


class ArtifactError(ValueError):
    """What a build job left in its private directory is not installable (a link, a device, too big...)."""


def default_cache_root() -> Path:
    """$KSTUDIO_CACHE_DIR, else `<checkout>/.cache/kstudio` in a source checkout, else `~/.cache/kstudio`.

    A checkout keeps its cache beside it (git-ignored, removed by `make clean`); an installed package
    uses the user's cache directory ($XDG_CACHE_HOME) since site-packages may be read-only.
    """
    configured = os.environ.get("KSTUDIO_CACHE_DIR")
    if configured:
        return Path(configured)
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache" / "kstudio"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "kstudio"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class BuildCache:
    def __init__(self, root: Path, lock_timeout: float = 1800.0, read_only: bool = False,
                 private_dir: Path | None = None) -> None:
        self.root = Path(root)
        # A waiter gives up after this long; a dead holder's lock is released by the kernel at once.
        self.lock_timeout = lock_timeout
        # Inside a sandboxed job: never write the shared root; build misses under `private_dir` instead.
        self.read_only = read_only
        self.private_dir = Path(private_dir) if private_dir is not None else None

    def entry_dir(self, key: str) -> Path:
        return self.root / key[:2] / key

    def lookup(self, key: str) -> Path | None:
        """The finished entry of `key`: one with a manifest (see the module docstring), else None."""
        entry = self.entry_dir(key)
        try:
            meta = json.loads((entry / META).read_text())
        except (OSError, ValueError):
            return None
        return entry if isinstance(meta, dict) and isinstance(meta.get("files"), dict) else None

    def meta(self, key: str, entry: Path | None = None) -> dict[str, object]:
        return json.loads(((entry or self.entry_dir(key)) / META).read_text())

    def read_verified(self, entry: Path, name: str) -> bytes:
        """`name`'s bytes in `entry`, checked against the sha256 its manifest recorded."""
        try:
            files = json.loads((entry / META).read_text())["files"]
            expected = files[name]["sha256"]
            data = (entry / name).read_bytes()
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CacheIntegrityError(f"{entry / name}: no manifest record or unreadable ({exc})") from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected:
            raise CacheIntegrityError(f"{entry / name} has sha256 {actual[:16]}..., its manifest recorded "
                                      f"{str(expected)[:16]}...: the cache entry was changed after it was installed")
        return data

    def verify(self, key: str) -> list[str]:
        """Every file of `key`'s entry whose bytes differ from its manifest (empty: intact). Trusted side."""
        entry = self.lookup(key)
        if entry is None:
            return ["(no entry)"]
        bad = []
        for name in self.meta(key, entry)["files"]:  # type: ignore[union-attr]
            try:
                self.read_verified(entry, str(name))
            except CacheIntegrityError:
                bad.append(str(name))
        return bad

    def evict(self, key: str) -> None:
        """Drop `key`'s entry (a corrupt one): renamed aside first, so that readers never see half of it."""
        entry = self.entry_dir(key)
        if not entry.exists():
            return
        aside = entry.parent / f".{key}.{os.getpid()}.{time.monotonic_ns()}.evicted.tmp"
        try:
            os.rename(entry, aside)
        except OSError:
            return
        shutil.rmtree(aside, ignore_errors=True)

    def install(self, key: str, staged: Path, built: Mapping[str, object], names: list[str] | None = None,
                ) -> tuple[Path, bool]:
        """Trusted side: copy the regular files `names` (default: every top-level regular file) of `staged`, a
        sandboxed job's private output, into the entry of `key` with their hashes in its manifest. Returns the
        entry and whether it already existed (an existing entry is kept: first install wins). Raises
        ArtifactError when `staged` holds a link, a special file or too much."""
        chosen = _staged_files(Path(staged), names)

        def copy(out: Path) -> Mapping[str, object]:
            for name, source in chosen:
                _copy_regular(source, out / name)
            return built

        if self.lookup(key) is not None and self.verify(key):
            self.evict(key)  # corrupt: replaced by this fresh build
        return self.get_or_build(key, copy)

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
        if self.read_only:
            return self._build_privately(key, build), False
        entry = self.entry_dir(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(entry.parent / f"{key}.lock", timeout=self.lock_timeout):
            # Whoever held the lock before us may have just built it.
            found = self.lookup(key)
            if found is not None:
                return found, True
            self._remove_leftovers(key)
            return self._build(key, build), False

    def _build_privately(self, key: str, build: Callable[[Path], Mapping[str, object] | None]) -> Path:
        """A read-only cache's miss: built into a fresh directory of its own, used by this process only."""
        base = self.private_dir or Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        out = Path(tempfile.mkdtemp(prefix=f"build-{key[:16]}-", dir=base))
        self._fill(key, out, build)
        return out

    def _fill(self, key: str, out: Path, build: Callable[[Path], Mapping[str, object] | None]) -> None:
        started = time.time()
        built = build(out)
        files = {p.name: {"sha256": sha256_file(p), "bytes": p.stat().st_size}
                 for p in sorted(out.iterdir()) if p.name != META and p.is_file() and not p.is_symlink()}
        meta = {
            "key": key,
            "format": ENTRY_FORMAT,
            "created": started,
            "seconds": round(time.time() - started, 3),
            "built": dict(built or {}),
            "files": files,
        }
        (out / META).write_text(json.dumps(meta, indent=1, sort_keys=True))

    def _build(self, key: str, build: Callable[[Path], Mapping[str, object] | None]) -> Path:
        entry = self.entry_dir(key)
        # Next to the entry, so that the final rename stays on one filesystem and is atomic.
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=entry.parent))
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the entry from sandboxed readers
        try:
            self._fill(key, tmp, build)
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
        """Drop what a killed builder left: a half-written entry without a manifest, old temp dirs."""
        entry = self.entry_dir(key)
        if entry.exists():
            shutil.rmtree(entry, ignore_errors=True)
        for tmp in entry.parent.glob(f".{key}.*.tmp"):
            if time.time() - tmp.stat().st_mtime > STALE_TMP_SECONDS:
                shutil.rmtree(tmp, ignore_errors=True)


def _staged_files(staged: Path, names: list[str] | None) -> list[tuple[str, Path]]:
    """The files to install from a job's private output, each checked without following links."""
    if names is None:
        names = sorted(p.name for p in staged.iterdir() if p.name != META and not p.is_dir())
    if len(names) > MAX_ENTRY_FILES:
        raise ArtifactError(f"{len(names)} files in a build's output (at most {MAX_ENTRY_FILES})")
    chosen, total = [], 0
    for name in names:
        if not name or "/" in name or name in (".", "..", META):
            raise ArtifactError(f"{name!r} is not a plain file name")
        path = staged / name
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            raise ArtifactError(f"{name} in a build's output is not a regular file (a link or a special file)")
        total += info.st_size
        if total > MAX_ENTRY_BYTES:
            raise ArtifactError(f"a build's output is larger than {MAX_ENTRY_BYTES} bytes")
        chosen.append((name, path))
    return chosen


def _copy_regular(source: Path, target: Path) -> None:
    """Copy a regular file without following a link (O_NOFOLLOW) and re-checking what was opened."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactError(f"{source.name} in a build's output is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as reader, open(target, "wb") as writer:
            shutil.copyfileobj(reader, writer, 1 << 20)
            if writer.tell() > MAX_ENTRY_BYTES:
                raise ArtifactError(f"{source.name} grew beyond {MAX_ENTRY_BYTES} bytes while it was copied")
    finally:
        os.close(fd)
    os.chmod(target, 0o644)
