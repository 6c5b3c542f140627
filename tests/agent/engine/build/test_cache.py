import json
import multiprocessing
import time
from pathlib import Path

import pytest

from agent.engine.build.cache import BuildCache, default_cache_root


def _write_payload(out: Path) -> dict[str, object]:
    (out / "payload.txt").write_text("built")
    return {"kind": "test", "what": "payload"}


def _slow_counted_build(marker: Path) -> None:
    """Used by two processes at once: appends a line to `marker` each time it really builds."""

    def build(out: Path) -> dict[str, object]:
        with open(marker, "a") as handle:
            handle.write("built\n")
        time.sleep(1.0)  # long enough for the other process to arrive while this one holds the lock
        return _write_payload(out)

    return build


def _build_in_child(root: str, marker: str, results: "multiprocessing.Queue[bool]") -> None:
    _entry, hit = BuildCache(Path(root)).get_or_build("k" * 64, _slow_counted_build(Path(marker)))
    results.put(hit)


def test_it_builds_once_then_hits(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    calls = []

    def build(out: Path) -> dict[str, object]:
        calls.append(out)
        return _write_payload(out)

    entry, hit = cache.get_or_build("a" * 64, build)
    again, hit_again = cache.get_or_build("a" * 64, build)
    assert (hit, hit_again) == (False, True)
    assert entry == again == tmp_path / "aa" / ("a" * 64)
    assert (entry / "payload.txt").read_text() == "built"
    assert len(calls) == 1


def test_meta_records_the_key_the_time_and_what_was_built(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    entry, _ = cache.get_or_build("b" * 64, _write_payload)
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["key"] == "b" * 64
    assert meta["seconds"] >= 0 and meta["created"] <= time.time()
    assert meta["built"] == {"kind": "test", "what": "payload"}


def test_a_failed_build_leaves_nothing_behind_and_reraises(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)

    def broken(out: Path) -> None:
        (out / "half-written").write_text("x")
        raise RuntimeError("compiler exploded")

    with pytest.raises(RuntimeError, match="compiler exploded"):
        cache.get_or_build("c" * 64, broken)
    assert cache.lookup("c" * 64) is None
    assert [p.name for p in (tmp_path / "cc").iterdir()] == ["c" * 64 + ".lock"]
    _entry, hit = cache.get_or_build("c" * 64, _write_payload)  # and a later build still works
    assert hit is False


def test_two_processes_building_one_key_build_it_once(tmp_path: Path) -> None:
    marker = tmp_path / "builds.txt"
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    children = [
        spawn.Process(target=_build_in_child, args=(str(tmp_path / "cache"), str(marker), results)) for _ in range(2)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert sorted(results.get(timeout=5) for _ in children) == [False, True]
    assert marker.read_text().splitlines() == ["built"]


def test_a_half_written_entry_from_a_killed_builder_is_rebuilt(tmp_path: Path) -> None:
    cache = BuildCache(tmp_path)
    orphan = cache.entry_dir("d" * 64)
    orphan.mkdir(parents=True)  # no meta.json: never finished
    entry, hit = cache.get_or_build("d" * 64, _write_payload)
    assert hit is False and (entry / "meta.json").is_file()


def test_the_default_root_is_configurable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KSTUDIO_CACHE_DIR", str(tmp_path / "shared"))
    assert default_cache_root() == tmp_path / "shared"
    monkeypatch.delenv("KSTUDIO_CACHE_DIR")
    assert default_cache_root() == Path(__file__).resolve().parents[4] / ".cache" / "kstudio"
