import json
import logging
import os
import secrets
import signal
import time
from pathlib import Path

import psutil
import pytest

from agent.engine.sandbox import Job, Limits, Sandbox, SandboxError, bwrap

CHECKOUT = Path(__file__).resolve().parents[4]
# What a studio process holds in its environment; none of it may reach a job.
STUDIO_SECRETS = {"SECRET_KEY": "django-insecure-hunter2", "DATABASE_URL": "postgres://studio:pw@db:5432/kstudio",
                  "REDIS_URL": "redis://:pw@redis:6379/0", "OPENAI_API_KEY": "sk-hunter2", "HF_TOKEN": "hf_hunter2",
                  "PGPASSWORD": "hunter2", "KSTUDIO_TEST_SECRET": "hunter2"}


def _studio_env() -> dict[str, str]:
    return {**os.environ, **STUDIO_SECRETS}


@pytest.fixture(scope="module")
def box():
    with Sandbox(preload=("agent.engine.sandbox.probes",), env=_studio_env()) as sandbox:
        yield sandbox


@pytest.fixture(scope="module", params=["bwrap", "namespaces-only"])
def walled(request):
    """The same escape checks with bubblewrap's wall and with the inner namespaces alone (the fallback)."""
    if request.param == "bwrap" and bwrap.usable()[0] is None:
        pytest.skip(f"bubblewrap is not usable here: {bwrap.usable()[1]}")
    with Sandbox(preload=("agent.engine.sandbox.probes",), env=_studio_env(), bwrap=request.param == "bwrap") as sandbox:
        yield sandbox


def _report(box, **payload):
    out = box.run(Job("agent.engine.sandbox.probes:report", payload))
    assert out.ok, out.stderr
    return json.loads(out.result)


def test_it_hides_other_processes_the_network_and_tmp(walled, tmp_path):
    marker = "/tmp/kstudio-sandbox-marker"
    open(marker, "w").close()
    try:
        facts = _report(walled, port=5432, paths=[f"/proc/{os.getpid()}/cmdline"])
    finally:
        os.remove(marker)
    assert facts["isolation"].startswith("bwrap+namespaces" if walled.wall == "bwrap" else "namespaces")
    # This test's own process is never visible; under bwrap as root the job may share bwrap's /proc,
    # which shows only the zygote (pid 1) and the job's own processes.
    assert facts["can_read"][f"/proc/{os.getpid()}/cmdline"] is False or facts["visible_pids"] == [1]
    assert len(facts["visible_pids"]) <= 3
    # Only directories bound back on purpose (a checkout or virtualenv under /tmp) may show there.
    assert "kstudio-sandbox-marker" not in facts["tmp"]
    assert facts["network"].startswith("refused")


def test_it_gives_the_child_no_secrets_from_the_environment(walled):
    facts = _report(walled, paths=["/proc/self/environ", "/proc/1/environ", "/proc/1/mem"])
    assert not set(STUDIO_SECRETS) & set(facts["env"])
    assert facts["env"]["CUDA_VISIBLE_DEVICES"] == "" and facts["env"]["HOME"] == "/tmp"
    # The exec-time environment block (what /proc/*/environ shows) was filtered before the zygote started.
    blocks = "".join(text or "" for text in facts["contents"].values())
    assert "hunter2" not in blocks and "SECRET_KEY" not in blocks
    assert facts["contents"]["/proc/self/environ"] is not None  # the job reads its own: the check saw something


def test_it_hides_the_studios_files_from_the_child(walled):
    marker = CHECKOUT / "var" / f"kstudio-test-secret-{secrets.token_hex(4)}"
    marker.parent.mkdir(exist_ok=True)
    marker.write_text("hunter2")
    try:
        paths = [str(marker), str(CHECKOUT / "studio" / "settings.py"), str(CHECKOUT / "manage.py"),
                 str(CHECKOUT / "agent" / "engine" / "sandbox" / "zygote.py")]
        facts = _report(walled, paths=paths)
    finally:
        marker.unlink()
    readable = {Path(p).name: ok for p, ok in facts["can_read"].items()}
    assert readable == {marker.name: False, "settings.py": False, "manage.py": False, "zygote.py": True}


def test_it_keeps_a_jobs_writes_inside_its_private_tmp(walled, tmp_path):
    tag = secrets.token_hex(4)
    inside = f"/tmp/kstudio-job-{tag}/file"
    host_tmp = str(tmp_path / f"job-{tag}")  # a host directory under /tmp: the job gets an empty /tmp instead
    package = str(CHECKOUT / "agent" / f"kstudio_escape_{tag}.py")
    out = walled.run(Job("agent.engine.sandbox.probes:attempt_writes", {"paths": [inside, host_tmp, package]}))
    assert out.ok, out.stderr
    landed = json.loads(out.result)
    assert landed[inside] is True  # the private /tmp is writable...
    assert not os.path.exists(inside) and not os.path.exists(host_tmp)  # ...and nothing of it reaches the host
    if walled.wall == "bwrap":  # the fallback binds our package back writable for a job run as root
        assert landed[package] is False and not os.path.exists(package)
    elif os.path.exists(package):
        os.remove(package)
    assert walled.run(Job("agent.engine.sandbox.probes:report", {"paths": [inside]})).ok


def test_a_file_left_in_shared_memory_by_one_job_never_reaches_the_next_or_the_host(walled):
    # /dev/shm was bwrap's for the zygote's whole life (or the host's, without bwrap): one evaluation's candidate left
    # files there that another user's read in the next evaluation.
    left = f"/dev/shm/kstudio-shm-{secrets.token_hex(4)}"
    out = walled.run(Job("agent.engine.sandbox.probes:attempt_writes", {"paths": [left]}))
    assert out.ok, out.stderr
    assert json.loads(out.result)[left] is True, "the job's own /dev/shm is writable"
    assert not os.path.exists(left)
    assert _report(walled, paths=[left])["can_read"][left] is False


def test_it_warns_loudly_and_says_so_in_every_result_without_bubblewrap(monkeypatch, caplog):
    monkeypatch.setattr(bwrap, "usable", lambda: (None, "bubblewrap is not installed"))
    caplog.set_level(logging.WARNING, logger="agent.engine.sandbox.client")
    with Sandbox(preload=()) as sandbox:
        out = sandbox.run(Job("agent.engine.sandbox.probes:echo", {"result": b"ran"}))
    assert out.result == b"ran" and "WARNING: bubblewrap is not installed" in out.isolation
    assert any("SANDBOX WITHOUT BUBBLEWRAP" in r.getMessage() for r in caplog.records)
    with pytest.raises(SandboxError, match="requires bubblewrap: bubblewrap is not installed"):
        Sandbox(preload=(), bwrap=True).start()


def test_it_kills_a_job_that_runs_past_its_wall_time_with_its_grandchildren(box):
    tag = f"ks{secrets.token_hex(5)}"  # the job and its grandchild take this name: only they can match
    started = time.monotonic()
    out = box.run(Job("agent.engine.sandbox.probes:sleep", {"seconds": 60, "grandchild": True, "tag": tag},
                      limits=Limits(wall_seconds=1)))
    assert out.killed == "wall_time"
    assert time.monotonic() - started < 10
    time.sleep(0.5)
    # A zombie is dead, only not yet reaped by its parent; anything else with the tag escaped the kill.
    survivors = [p for p in psutil.process_iter(["name", "status"])
                 if p.info["name"] == tag and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert survivors == []


def test_it_kills_a_job_that_allocates_without_bound(box):
    out = box.run(Job("agent.engine.sandbox.probes:allocate", {}, limits=Limits(memory_bytes=512 << 20, wall_seconds=60)))
    assert not out.ok
    assert out.killed == "memory" or "MemoryError" in out.stderr


def test_a_cpu_job_has_its_memory_on_top_of_the_libraries_its_zygote_mapped():
    # torch alone maps about 600 MiB here and a CUDA build of it gigabytes: a limit on the whole address space left
    # no room to start a CPU job on a GPU machine. The limit is the job's own, over what the zygote had mapped.
    with Sandbox(preload=("agent.engine.sandbox.probes", "torch"), env=_studio_env()) as torch_box:
        small = Limits(memory_bytes=256 << 20, wall_seconds=60)
        assert torch_box.run(Job("agent.engine.sandbox.probes:echo", {"result": b"started"}, limits=small,
                                 device="cpu")).result == b"started"
        hoarder = torch_box.run(Job("agent.engine.sandbox.probes:allocate", {}, limits=small, device="cpu"))
    assert not hoarder.ok and (hoarder.killed == "memory" or "MemoryError" in hoarder.stderr)


def test_it_contains_a_fork_bomb(box):
    out = box.run(Job("agent.engine.sandbox.probes:fork_bomb", {}, limits=Limits(processes=32, wall_seconds=20)))
    assert out.killed in {"processes", "wall_time"}
    assert box.run(Job("agent.engine.sandbox.probes:echo", {"result": b"alive"})).result == b"alive"


def test_unreaped_children_count_against_the_process_limit(box):
    """A zombie runs nothing but holds a pid: a job keeping thousands would drain the host's, and slow every walk of
    its tree (each stop of the job's) by a quarter of a second per two thousand (red team, session 38)."""
    out = box.run(Job("agent.engine.sandbox.probes:zombies", {"count": 64, "seconds": 5},
                      limits=Limits(processes=32, wall_seconds=20)))
    assert out.killed == "processes", (out.killed, out.stderr[-500:])
    assert box.run(Job("agent.engine.sandbox.probes:echo", {"result": b"alive"})).result == b"alive"


def test_it_reports_the_signal_that_killed_a_crashing_job(box):
    out = box.run(Job("agent.engine.sandbox.probes:segfault", {}))
    assert out.signal == signal.SIGSEGV
    assert box.run(Job("agent.engine.sandbox.probes:echo", {"result": b"next"})).result == b"next"


def _zygote(sandbox: Sandbox) -> psutil.Process:
    """The sandbox's zygote on the host: its process, or bubblewrap's child (pid 1 of bubblewrap's namespace)."""
    top = psutil.Process(sandbox._proc.pid)
    return next(p for p in [top, *top.children(recursive=True)]
                if p.name() != "bwrap" and "agent.engine.sandbox.zygote" in p.cmdline())


def _gone(process: psutil.Process, seconds: float = 5.0) -> bool:
    """Whether `process` has exited (a zombie too: its parent, bubblewrap, died first) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_job_cannot_kill_its_zygote_with_any_signal(walled):
    """Under bubblewrap the zygote is pid 1 of the namespace its jobs share, and the kernel gives a namespace's init
    every signal from inside it that it catches: a candidate's os.kill(1, SIGINT) ended the zygote (Python's SIGINT
    handler) and with it the evaluation, as an error instead of the candidate's verdict. Every signal, at pid 1, at its
    first process's parent and at the zygote's pid on the host: the zygote lives on, unstopped, and runs the next job."""
    zygote = _zygote(walled)
    out = walled.run(Job("agent.engine.sandbox.probes:signal_zygote", {"pid": zygote.pid}))
    assert out.ok, out.stderr
    seen = json.loads(out.result)
    assert seen["sent"], "the job found no pid to try"
    assert all(not state.startswith("T") for state in seen["after_stop"].values()), seen["after_stop"]
    assert zygote.is_running() and _zygote(walled) == zygote, "the zygote was replaced"
    assert walled.run(Job("agent.engine.sandbox.probes:echo", {"result": b"next"})).result == b"next"
    assert _zygote(walled) == zygote


def test_a_job_still_running_when_its_sandbox_is_closed_ends_promptly_as_lost():
    """A thread's job whose sandbox another thread closes (an evaluation that failed on one side, then closed) ends with
    SandboxLost: its loop waited for ever for a report from a socket closed under it, and the CLI hung at its exit."""
    import threading

    from agent.engine.sandbox.client import SandboxLost

    sandbox = Sandbox(preload=("agent.engine.sandbox.probes",))
    sandbox.start()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            sandbox.run(Job("agent.engine.sandbox.probes:sleep", {"seconds": 60}, limits=Limits(wall_seconds=120)))
        except BaseException as exc:  # noqa: BLE001 - the test reads what ended it
            raised.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    time.sleep(1.0)
    sandbox.close()  # its zygote is killed after 5 s: it still supervises the sleeping job
    runner.join(15)
    assert not runner.is_alive(), "the job's thread still waits on a sandbox that was closed"
    assert raised and isinstance(raised[0], SandboxLost), raised
    assert sandbox.run(Job("agent.engine.sandbox.probes:echo", {"result": b"again"})).result == b"again"
    sandbox.close()


def test_a_job_whose_zygote_never_reports_ends_as_lost_after_its_wall_time(monkeypatch):
    """A zygote stopped (a job in the host's pid namespace, where user namespaces are refused, can SIGSTOP it) or hung
    never reports on its job: past the job's wall-clock limit and a grace the run ends, and the sandbox starts anew."""
    import agent.engine.sandbox.client as client

    monkeypatch.setattr(client, "REPORT_GRACE", 2.0)
    with Sandbox(preload=("agent.engine.sandbox.probes",)) as sandbox:
        zygote = _zygote(sandbox)
        zygote.suspend()
        began = time.monotonic()
        with pytest.raises(client.SandboxLost, match="had not reported on the job"):
            sandbox.run(Job("agent.engine.sandbox.probes:echo", {"result": b"never"}, limits=Limits(wall_seconds=2)))
        assert time.monotonic() - began < 15
        assert _gone(zygote)
        assert sandbox.run(Job("agent.engine.sandbox.probes:echo", {"result": b"again"})).result == b"again"


def test_it_caps_captured_output_but_keeps_head_and_tail(box):
    noise = "first line\n" + "x" * 1_000_000 + "\nlast line\n"
    out = box.run(Job("agent.engine.sandbox.probes:echo", {"stdout": noise}, limits=Limits(output_bytes=4096)))
    assert out.ok
    assert out.stdout.startswith("first line") and out.stdout.rstrip().endswith("last line")
    assert len(out.stdout) < 5000
    assert out.stdout_bytes == len(noise)


def test_it_returns_a_large_result_intact(box):
    blob = os.urandom(64 << 20)
    out = box.run(Job("agent.engine.sandbox.probes:echo", {"result": blob}))
    assert out.result == blob


@pytest.mark.parametrize("wall", ["bwrap", "namespaces-only"])
def test_it_keeps_a_shared_cache_under_tmp_visible_read_only_and_a_jobs_private_dir_its_own(wall, tmp_path):
    if wall == "bwrap" and bwrap.usable()[0] is None:
        pytest.skip(f"bubblewrap is not usable here: {bwrap.usable()[1]}")
    cache, jobs, trusted = tmp_path / "cache", tmp_path / "jobs", tmp_path / "trusted"
    for directory in (cache / "ab" / "entry", jobs / "mine", jobs / "other", trusted):
        directory.mkdir(parents=True)
    (cache / "ab" / "entry" / "lib.so").write_text("built")
    (jobs / "other" / "output").write_text("another job's")
    (trusted / "baseline.json").write_text("{}")
    env = {**os.environ, "KSTUDIO_CACHE_DIR": str(cache), "KSTUDIO_JOB_ROOT": str(jobs), "KSTUDIO_TRUSTED_DIR": str(trusted)}
    # A sandbox's shared directories are fixed when it starts (bwrap mounts them then).
    with Sandbox(preload=(), env=env, bwrap=wall == "bwrap") as sandbox:
        out = sandbox.run(Job("agent.engine.sandbox.probes:report", {"paths": [
            str(cache / "ab" / "entry" / "lib.so"), str(jobs / "other" / "output"), str(trusted / "baseline.json")]}))
        assert out.ok, out.stderr
        facts = json.loads(out.result)
        targets = [str(cache / "new"), str(cache / "ab" / "entry" / "lib.so"), str(cache / "ab" / "new" / "x"),
                   str(jobs / "mine" / "built.so"), str(jobs / "other" / "output")]
        wrote = sandbox.run(Job("agent.engine.sandbox.probes:attempt_writes", {"paths": targets}, private_dir=str(jobs / "mine")))
    assert facts["can_read"] == {str(cache / "ab" / "entry" / "lib.so"): True, str(jobs / "other" / "output"): False,
                                 str(trusted / "baseline.json"): False}
    assert facts["tmp"] != []  # only the kept paths' top directory, nothing else of the host's /tmp
    assert str(tmp_path).split("/")[2] in facts["tmp"]
    landed = json.loads(wrote.result)
    assert not any(landed[p] for p in targets[:3]), landed
    assert (cache / "ab" / "entry" / "lib.so").read_text() == "built" and sorted(p.name for p in cache.iterdir()) == ["ab"]
    assert (jobs / "mine" / "built.so").read_text().startswith("written")  # its own directory, and only that one
    assert (jobs / "other" / "output").read_text() == "another job's"
    assert [p.name for p in trusted.iterdir()] == ["baseline.json"]


def test_a_detached_job_returns_at_its_whole_result_and_the_next_job_gets_its_own(box):
    started = time.monotonic()
    out = box.run(Job("agent.engine.sandbox.probes:slow_exit", {"result": b"whole", "seconds": 3}, detach=True))
    assert out.ok and out.result == b"whole"
    assert time.monotonic() - started < 2.5, "the client waited for the job's exit"
    # The zygote reaps the detached job first; its report must not be taken for the next job's.
    again = box.run(Job("agent.engine.sandbox.probes:echo", {"result": b"next"}))
    assert again.ok and again.result == b"next" and "detached" not in again.isolation


def test_a_detached_job_that_fails_after_part_of_its_result_is_waited_for_and_reported(box):
    out = box.run(Job("agent.engine.sandbox.probes:slow_exit", {"result": b"part", "seconds": 0, "fail": True}, detach=True))
    assert not out.ok and out.exit_code not in (0, None)
    assert "failed after part of its result" in out.stderr


def test_results_come_back_without_the_harness_marker(box):
    assert box.run(Job("agent.engine.sandbox.probes:echo", {"result": b"plain"})).result == b"plain"


def _ticks_through_a_stop(box, function: str) -> tuple[dict, float, float]:
    """Runs the probe job `function` (2 s of ticks), stops it from 0.6 s to 1.4 s: its ticks, the stop and the resume."""
    import threading

    from agent.engine.sandbox.client import JobControl

    control = JobControl()
    results = {}
    runner = threading.Thread(target=lambda: results.update(out=box.run(Job(
        f"agent.engine.sandbox.probes:{function}", {"seconds": 2.0}, control=control))))
    runner.start()
    time.sleep(0.6)
    stopped_at = time.monotonic()
    assert control.stop()
    time.sleep(0.8)
    resumed_at = time.monotonic()
    assert control.resume()
    runner.join(30)
    control.close()
    out = results["out"]
    assert out.ok, out.stderr
    return json.loads(out.result), stopped_at, resumed_at


def test_the_parent_can_stop_every_process_of_a_running_job_and_resume_it(box):
    """What keeps a candidate's processes off the CPU while the baselines are timed (agent/engine/evaluate/session.py)."""
    seen, stopped_at, resumed_at = _ticks_through_a_stop(box, "ticks")
    for who in ("job", "child"):
        during = [t for t in seen[who] if stopped_at + 0.05 < t < resumed_at - 0.05]
        assert not during, f"the {who} ran while stopped: {len(during)} ticks"
        assert any(t > resumed_at for t in seen[who]), f"the {who} went on after the resume"


def test_a_stop_stops_a_process_whose_first_thread_has_exited(box):
    """Such a process reads "zombie" in /proc (its first thread's state) while its other threads run: left out of the
    stop, they ran through the baselines' batches, and a candidate's helpers spun there to slow eager (docs/threat-model.md)."""
    seen, stopped_at, resumed_at = _ticks_through_a_stop(box, "ticks_behind_a_dead_leader")
    ticks = seen["child"]
    assert any(t < stopped_at for t in ticks) and any(t > resumed_at for t in ticks), "the thread never ran"
    during = [t for t in ticks if stopped_at + 0.05 < t < resumed_at - 0.05]
    assert not during, f"the thread behind the dead leader ran while stopped: {len(during)} ticks"


def _cpu_when_idle(box, function: str, payload: dict) -> tuple[float, float]:
    """Runs the probe job `function` under a JobControl and stops it every 0.3 s until two readings agree (its work is
    done and it idles for the rest of its 6 s; a loaded box only delays that): the first and the settled reading."""
    import threading

    from agent.engine.sandbox.client import JobControl

    control = JobControl()
    results = {}
    runner = threading.Thread(target=lambda: results.update(out=box.run(Job(
        f"agent.engine.sandbox.probes:{function}", {**payload, "idle": 6.0}, control=control))))
    runner.start()
    read: list[float] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (len(read) < 3 or read[-1] - read[-2] > 0.002):
        time.sleep(0.3)
        assert control.stop() and control.cpu_seconds is not None
        read.append(control.cpu_seconds)
        assert control.resume()
    runner.join(30)
    control.close()
    assert len(read) >= 3 and read[-1] - read[-2] <= 0.002, read
    return read[0], read[-1]


def test_a_stop_reads_the_cpu_time_of_every_thread_and_process_of_the_job(box):
    """What shows a candidate using more cores than the evaluation allows (agent/engine/evaluate/cpu_share.py): the
    zygote's reading at each stop, outside the job, of a second thread, a reaped child and an orphaned grandchild."""
    early, late = _cpu_when_idle(box, "spin_everywhere", {"seconds": 0.6})
    # Three spinners of 0.6 s of CPU each (main thread, helper thread, orphan), less a tick per process: one left out
    # would leave 1.2 s and the start-up's fraction of a second.
    assert late > early and late >= 3 * 0.6 - 0.05, (early, late)


def test_a_stop_reads_the_cpu_time_of_processes_whose_time_no_parent_receives(box):
    """A child reaped by the kernel (its parent ignores SIGCHLD) and an orphan reaped by the zygote: their CPU time
    reaches no process's figures in /proc, so a job that handed its calls to them read as one thread on every core.
    The sandbox's cgroup counts every task it ever held (cpu_cgroup.py)."""
    if box.cgroup is None:
        pytest.skip("no cgroup could be made on this host: the CPU time is read from /proc, which misses these")
    early, late = _cpu_when_idle(box, "spin_unreaped", {"seconds": 0.6})
    assert late >= 2 * 0.6 - 0.05, (early, late)  # the two helpers' 0.6 s each; /proc's walk read neither


def test_a_stop_counts_processes_that_each_ran_under_a_tick(box):
    """Twenty unreaped children of 8 ms each, zombies when the stop comes: each is counted. (/proc/<pid>/stat's
    figures are sampled in 10 ms ticks, and one zombie of 7.7 ms read 0 there on this box, so the reading takes each
    thread's exact schedstat where it is larger; over twenty, the ticks' sampling happened to count them too, so this
    guards the zombies' being read at all rather than that choice.)"""
    _, swarm = _cpu_when_idle(box, "spin_in_a_swarm", {"count": 20, "each": 0.008})
    assert swarm >= 20 * 0.008 * 0.9, swarm
