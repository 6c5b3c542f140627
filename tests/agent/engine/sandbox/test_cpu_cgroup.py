"""The sandbox's cgroup (agent/engine/sandbox/cpu_cgroup.py): what starts in it is counted, however it ends."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agent.engine.sandbox import cpu_cgroup


@pytest.fixture
def cgroup():
    directory = cpu_cgroup.create()
    if directory is None:
        pytest.skip("no cgroup can be made on this host (the sandbox then reads CPU time from /proc)")
    yield directory
    cpu_cgroup.remove(directory)
    assert not os.path.exists(directory), "an empty cgroup is removed"


def test_a_command_started_inside_counts_the_cpu_of_a_grandchild_the_kernel_reaped(cgroup):
    before = cpu_cgroup.usage_seconds(cgroup)
    # The child ignores SIGCHLD and forks a grandchild that burns 0.3 s: the kernel reaps it and no process's
    # figures keep its time, the cgroup's usage does.
    burn = ("import os, signal, time\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\nif os.fork() == 0:\n"
            "    end = time.thread_time() + 0.3\n    while time.thread_time() < end: pass\n    os._exit(0)\n"
            "time.sleep(0.8)\n")
    subprocess.run(cpu_cgroup.enter_command(cgroup, [sys.executable, "-c", burn]), check=True, timeout=60)
    after = cpu_cgroup.usage_seconds(cgroup)
    assert before is not None and after is not None and after - before >= 0.3, (before, after)


def test_a_sandbox_runs_in_a_cgroup_of_its_own_and_leaves_none_behind():
    from agent.engine.sandbox.client import Sandbox

    with Sandbox(preload=("agent.engine.sandbox.probes",)) as box:
        if box.cgroup is None:
            pytest.skip("no cgroup can be made on this host")
        assert cpu_cgroup.holds(box.cgroup, box._proc.pid)
        directory = box.cgroup
    assert not os.path.exists(directory)
