"""The parent's line to a job (agent/engine/evaluate/channel.py): a command's clock starts before its first byte goes,
and a job that does not read its command cannot hold the parent."""
import fcntl
import os
import threading
import time

import pytest

from agent.engine.evaluate.channel import ChannelError, ParentEnd

F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, where Python names it
LONG_COMMAND = {"cmd": "batch", "keys": list(range(40_000))}  # about 270 KB: far more than one page of pipe


def test_a_command_longer_than_the_pipe_is_timed_from_before_its_first_byte():
    end = ParentEnd()
    reader, _ = end.job_fds()
    fcntl.fcntl(reader, F_SETPIPE_SZ, 4096)  # what a job can do to its own end (the fourth red team's x5)
    read = bytearray()

    def slow_job() -> None:
        time.sleep(0.3)  # the calls a job could run on the keys it had read, before the parent's write ends
        while not read.endswith(b"\n"):
            read.extend(os.read(reader, 1 << 16))

    job = threading.Thread(target=slow_job)
    job.start()
    before = time.perf_counter()
    began = end.send(LONG_COMMAND)
    after = time.perf_counter()
    job.join()
    assert after - before >= 0.3, "the write waited on the job's reading"
    assert began - before < 0.05, "the clock was read before the first byte, so the job's early work is in its time"
    assert len(read) > 200_000


def test_a_job_that_never_reads_its_command_fails_to_answer_within_the_deadline():
    end = ParentEnd()
    fcntl.fcntl(end.job_fds()[0], F_SETPIPE_SZ, 4096)
    started = time.monotonic()
    with pytest.raises(ChannelError, match="did not read its command within"):
        end.send(LONG_COMMAND, seconds=0.5)
    assert time.monotonic() - started < 5, "the parent was not held"


@pytest.mark.parametrize("line, why", [
    (b'{"projections": [[' + b"1" * 400 + b']]}\n', "an integer of 400 digits"),  # 10**400 broke the figures' arithmetic
    (b'{"ready": ' + b"[" * 100_000 + b"]" * 100_000 + b'}\n', "maximum recursion"),  # deep enough for RecursionError
])
def test_a_reply_the_parent_cannot_take_apart_is_the_jobs_failure_not_the_engines_exception(line, why):
    # The seventh red team: each ended the evaluation as an uncaught OverflowError or RecursionError, with no verdict.
    end = ParentEnd()
    writer = end.job_fds()[1]
    job = threading.Thread(target=lambda: os.write(writer, line))  # more than a pipe holds: written beside the read
    job.start()
    with pytest.raises(ChannelError, match="not JSON the parent reads") as caught:
        end.receive(10.0)
    job.join()
    assert why in str(caught.value)
    end.close()
