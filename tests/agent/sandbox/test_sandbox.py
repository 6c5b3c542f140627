import json
import os
import secrets
import signal
import time

import psutil
import pytest

from agent.sandbox import Job, Limits, Sandbox


@pytest.fixture(scope="module")
def box():
    os.environ["KSTUDIO_TEST_SECRET"] = "hunter2"
    with Sandbox(preload=("agent.sandbox.probes",)) as sandbox:
        yield sandbox
    del os.environ["KSTUDIO_TEST_SECRET"]


def _report(box, **payload):
    out = box.run(Job("agent.sandbox.probes:report", payload))
    assert out.ok, out.stderr
    return json.loads(out.result)


def test_it_hides_other_processes_the_network_and_tmp(box, tmp_path):
    marker = "/tmp/kstudio-sandbox-marker"
    open(marker, "w").close()
    try:
        facts = _report(box, port=5432)
    finally:
        os.remove(marker)
    assert facts["isolation"] == "namespaces"
    assert facts["visible_pids"] == [1]
    # Only directories bound back on purpose (a checkout or virtualenv under /tmp) may show there.
    assert "kstudio-sandbox-marker" not in facts["tmp"]
    assert facts["network"].startswith("refused")


def test_it_gives_the_child_no_secrets_from_the_environment(box):
    env = _report(box)["env"]
    assert "KSTUDIO_TEST_SECRET" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == ""


def test_it_kills_a_job_that_runs_past_its_wall_time_with_its_grandchildren(box):
    tag = f"ks{secrets.token_hex(5)}"  # the job and its grandchild take this name: only they can match
    started = time.monotonic()
    out = box.run(Job("agent.sandbox.probes:sleep", {"seconds": 60, "grandchild": True, "tag": tag},
                      limits=Limits(wall_seconds=1)))
    assert out.killed == "wall_time"
    assert time.monotonic() - started < 10
    time.sleep(0.5)
    # A zombie is dead, only not yet reaped by its parent; anything else with the tag escaped the kill.
    survivors = [p for p in psutil.process_iter(["name", "status"])
                 if p.info["name"] == tag and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert survivors == []


def test_it_kills_a_job_that_allocates_without_bound(box):
    out = box.run(Job("agent.sandbox.probes:allocate", {}, limits=Limits(memory_bytes=512 << 20, wall_seconds=60)))
    assert not out.ok
    assert out.killed == "memory" or "MemoryError" in out.stderr


def test_it_contains_a_fork_bomb(box):
    out = box.run(Job("agent.sandbox.probes:fork_bomb", {}, limits=Limits(processes=32, wall_seconds=20)))
    assert out.killed in {"processes", "wall_time"}
    assert box.run(Job("agent.sandbox.probes:echo", {"result": b"alive"})).result == b"alive"


def test_it_reports_the_signal_that_killed_a_crashing_job(box):
    out = box.run(Job("agent.sandbox.probes:segfault", {}))
    assert out.signal == signal.SIGSEGV
    assert box.run(Job("agent.sandbox.probes:echo", {"result": b"next"})).result == b"next"


def test_it_caps_captured_output_but_keeps_head_and_tail(box):
    noise = "first line\n" + "x" * 1_000_000 + "\nlast line\n"
    out = box.run(Job("agent.sandbox.probes:echo", {"stdout": noise}, limits=Limits(output_bytes=4096)))
    assert out.ok
    assert out.stdout.startswith("first line") and out.stdout.rstrip().endswith("last line")
    assert len(out.stdout) < 5000
    assert out.stdout_bytes == len(noise)


def test_it_returns_a_large_result_intact(box):
    blob = os.urandom(64 << 20)
    out = box.run(Job("agent.sandbox.probes:echo", {"result": blob}))
    assert out.result == blob


def test_it_keeps_a_shared_cache_under_tmp_visible_and_writable(box, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "entry").write_text("built")
    facts = _report_with_env(box, {"KSTUDIO_CACHE_DIR": str(cache)}, paths=[str(cache / "entry")])
    assert facts["can_read"][str(cache / "entry")]
    assert facts["tmp"] != []  # only the kept path's top directory, nothing else of the host's /tmp
    assert str(tmp_path).split("/")[2] in facts["tmp"]


def _report_with_env(box, env, **payload):
    out = box.run(Job("agent.sandbox.probes:report", payload, env=env))
    assert out.ok, out.stderr
    return json.loads(out.result)
