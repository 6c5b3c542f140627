"""The parent's statistics and its line to a job (agent/engine/evaluate/session.py, channel.py)."""
import os

import pytest

from agent.engine.evaluate.channel import ChannelError, JobFailed, ParentEnd
from agent.engine.evaluate.session import median_interval


def test_the_speedup_interval_covers_the_median_and_narrows_with_more_rounds():
    five = median_interval([1.0, 1.1, 0.9, 1.05, 3.0])
    assert five[0] == 1.05 and five[1] == 0.9 and five[2] == 3.0  # 5 rounds: the whole range (93.75% coverage)
    many = median_interval([1.0 + 0.01 * (i % 7) for i in range(15)] + [5.0])
    assert many[1] >= 1.0 and many[2] < 5.0, "an outlier round leaves the interval of 16 rounds"


def test_a_reply_that_is_not_one_json_object_per_line_is_the_jobs_failure():
    end = ParentEnd()
    _, reply_w = end.job_fds()
    os.write(reply_w, b'{"ok": true}\n[1, 2]\nnot json\n{"fatal": true, "error": "boom", "kind": "runtime_error"}\n')
    assert end.receive(1.0)[0] == {"ok": True}
    with pytest.raises(ChannelError, match="not a JSON object"):
        end.receive(1.0)
    with pytest.raises(ChannelError, match="not JSON"):
        end.receive(1.0)
    with pytest.raises(JobFailed, match="boom"):
        end.receive(1.0)
    end.close()


def test_a_job_that_goes_quiet_or_away_is_noticed():
    end = ParentEnd(alive=lambda: False)
    with pytest.raises(ChannelError, match="ended without answering"):
        end.receive(5.0)
    end.close()
