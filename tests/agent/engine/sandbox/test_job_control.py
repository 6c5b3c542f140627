"""The stop's report (client.JobControl, zygote._freeze): the job's CPU time, and whether every process really
stopped. A job that outruns the freeze must never be taken for stopped (the session flags it: work_after_return)."""
from __future__ import annotations

import math
import os
import threading
import time

import pytest

from agent.engine.sandbox import zygote
from agent.engine.sandbox.client import JobControl
from agent.engine.sandbox.wire import STOP_FIGURES


def _stop(control: JobControl, reply: bytes) -> bool:
    """One stop, the zygote's side played on the control's own pipes: read the word, write `reply`."""
    commands, acks = control.zygote_fds()
    heard: list[bytes] = []

    def answer() -> None:
        heard.append(os.read(commands, 1))
        os.write(acks, reply)

    thread = threading.Thread(target=answer)
    thread.start()
    ok = control.stop()
    thread.join(5)
    assert heard == [b"S"]
    control.stopped = False  # as a resume would leave it
    return ok


def test_a_stop_that_left_a_process_running_marks_the_job_escaped_for_good():
    control = JobControl()
    try:
        assert _stop(control, b"s" + STOP_FIGURES.pack(1.25, True))
        assert control.cpu_seconds == 1.25 and not control.escaped
        assert _stop(control, b"s" + STOP_FIGURES.pack(2.5, False))
        assert control.cpu_seconds == 2.5 and control.escaped
        assert _stop(control, b"s" + STOP_FIGURES.pack(3.0, True))
        assert control.escaped  # once seen, it stays: that job was not off the CPU while others were timed
    finally:
        control.close()


def test_a_stop_without_its_figures_reads_no_cpu_time():
    control = JobControl()
    try:
        assert _stop(control, b"s")
        assert control.cpu_seconds is None and not control.escaped
    finally:
        control.close()


def test_a_stop_of_a_job_whose_cpu_time_is_not_counted_reads_none():
    # The zygote reads it for CPU jobs only: a GPU job's stop sends NaN, spared the walk over /proc.
    control = JobControl()
    try:
        assert _stop(control, b"s" + STOP_FIGURES.pack(math.nan, True))
        assert control.cpu_seconds is None and not control.escaped
    finally:
        control.close()


def test_the_freeze_says_so_when_a_process_is_still_running_at_its_deadline(monkeypatch: pytest.MonkeyPatch):
    pid = os.fork()
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    try:
        assert zygote._freeze(pid, stop=True)  # a plain sleeper stops
        zygote._freeze(pid, stop=False)
        # A process the freeze never sees stopped (as one forked faster than each scan would look): False, after
        # the deadline, however many SIGSTOPs went out.
        monkeypatch.setattr(zygote, "_thread_states", lambda pid: ["R"])
        started = time.monotonic()
        assert zygote._freeze(pid, stop=True) is False
        assert time.monotonic() - started >= 2.0
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
