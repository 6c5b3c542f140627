"""The parent's statistics and its line to a job (agent/engine/evaluate/session.py, channel.py)."""
import os

import pytest

from agent.engine.evaluate.channel import ChannelError, JobFailed, ParentEnd
from agent.engine.evaluate.session import Measured, Session, median_interval


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


def _sized(per_call: float, overhead: float, most: int = 20_000) -> tuple[list[int], int]:
    """The warm-up's batch sizes and its chosen size, on a job whose batches take `overhead + calls * per_call`."""
    session = object.__new__(Session)  # only the sizing: no jobs behind it
    sizes: list[int] = []

    def batch(model, keys, events=False):
        sizes.append(len(keys))
        return overhead + per_call * len(keys), None, float("nan")

    session._reference_batch = batch
    return sizes, session._autorange("eager", 0.05, Measured(), most)


def test_the_warm_up_jumps_to_the_batch_size_its_calls_predict_instead_of_doubling():
    sizes, calls = _sized(per_call=0.001, overhead=0.0002)
    assert sizes == [1, 1, 46, 55], "two untimed first calls, then the prediction (doubling took 1, 1, 2, ... 64)"
    assert calls == 50 and 0.05 <= 0.0002 + 55 * 0.001
    tiny, tiny_calls = _sized(per_call=2e-6, overhead=0.0005)
    assert tiny == [1, 1, 110, 8403, 20_000] and tiny_calls == 20_000, "calls lost in a batch's fixed cost: the cap"
    assert _sized(per_call=0.02, overhead=0.001) == ([1, 1, 3], 3), "slow calls: a batch of the target at once"
    capped, capped_calls = _sized(per_call=0.001, overhead=0.0, most=8)
    assert max(capped) == 8 and capped_calls == 8, "never past the most the caller allows"


def test_a_steady_compile_baseline_is_kept_however_noisy_the_candidate_was():
    from agent.engine.evaluate.session import keeps_compile_baseline

    steady = Measured(eager=[1.0, 1.01, 0.99, 1.0, 1.02], compile=[0.5, 0.51, 0.5, 0.49, 0.5],
                      candidate=[0.3, 2.0, 0.1, 5.0, 0.7])  # the candidate never converged
    assert keeps_compile_baseline(steady, 0.15)
    noisy = Measured(eager=[1.0, 1.01, 0.99, 1.0, 1.02], compile=[0.5, 0.9, 0.3, 0.49, 0.7])
    assert not keeps_compile_baseline(noisy, 0.15), "a ratio that moved is not stored for other evaluations"
    assert not keeps_compile_baseline(Measured(eager=steady.eager, compile=steady.compile, contended=1), 0.15)
    assert not keeps_compile_baseline(Measured(eager=steady.eager, compile=steady.compile, mismatched_calls=[3]), 0.15)
    assert not keeps_compile_baseline(Measured(eager=steady.eager), 0.15), "nothing compiled, nothing kept"
