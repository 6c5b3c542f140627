"""The speed-of-light fraction (agent/engine/evaluate/peaks.py, judge._speed_of_light): the device's peaks are measured once
by a job of ours and kept in the trusted store; the fraction is the problem's least time at those peaks over the
candidate's; a time far below the memory bound is rejected, not merely flagged."""
import dataclasses
import json

import pytest

from agent.engine.evaluate import Evaluator
from agent.engine.evaluate.judge import SOL_MARGIN, _speed_of_light, slowest_ms
from agent.engine.evaluate.session import Measured, median_interval
from agent.engine.evaluate.peaks import memory_roof
from agent.engine.verdict import Flag, Spread, Stage, Status, Timing, Verdict
from tests.agent.engine.evaluate.relu_case import CANDIDATE, CONFIG, relu_problem

PROBLEM = relu_problem(256, 1024)


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    with Evaluator(CONFIG, cache_root=tmp_path_factory.mktemp("kstudio-cache")) as ev:
        yield ev


def _timing(ms: float) -> Timing:
    spread = Spread(ms, ms, ms, ms, 1)
    return Timing(ms, ms, None, 1.0, None, spread, spread, None, "parent")


def test_the_memory_roof_is_the_fastest_of_several_memory_kernels():
    roof, kernels = memory_roof("cpu", 16 << 20)
    assert set(kernels) == {"copy (bytes)", "copy (float32)", "elementwise (float32)", "fill (writes only)",
                            "sum (reads only)"}
    assert all(rate > 1e7 for rate in kernels.values()) and roof == max(kernels.values())


def test_the_peaks_are_measured_once_by_our_job_and_kept_where_no_job_can_write(evaluator):
    first = evaluator.device_peaks(CONFIG)
    assert first is not None and first["copy_bytes_per_s"] > 1e8 and first["fp32_flops_per_s"] > 1e8
    assert first["copy_bytes_per_s"] == max(first["memory_kernels"].values())
    stored = list((evaluator.trusted_root / "peaks").glob("*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["key"] == first["key"]
    assert evaluator.device_peaks(CONFIG) == first  # read back, not measured again


def test_every_timed_verdict_carries_its_speed_of_light_fraction(evaluator):
    verdict = evaluator.evaluate(PROBLEM, CANDIDATE)
    assert verdict.accepted, verdict.message
    t = verdict.timing
    moved = 2 * 256 * 1024 * 4
    assert t.sol_bound == "memory" and t.achieved_bytes_per_s == pytest.approx(moved / (t.candidate_ms / 1000))
    assert t.sol_ms == pytest.approx(moved / t.peaks["copy_bytes_per_s"] * 1000)
    assert t.sol_fraction == pytest.approx(t.sol_ms / t.candidate_ms)
    assert t.speedup_vs_best is not None and "sol_fraction" in verdict.to_dict()["timing"]


def test_a_time_beyond_the_physical_bound_is_rejected_not_merely_flagged(evaluator, monkeypatch):
    # A device whose copy roof is 1 MB/s with a 1-byte cache, measured so every time (the peaks job answers the
    # same when asked again): moving 2 MiB takes two seconds at least, so any measured time is impossible on it.
    slow = dict(evaluator.device_peaks(CONFIG), copy_bytes_per_s=1e6, cache_bytes=1)
    asked: list[bool] = []
    monkeypatch.setattr(evaluator, "device_peaks", lambda cfg, progress=None, remeasure=False: asked.append(remeasure) or slow)
    verdict = evaluator.evaluate(PROBLEM, CANDIDATE)
    assert verdict.correct and verdict.status is Status.REJECTED, verdict.message
    assert Flag.BEYOND_ROOFLINE.value in verdict.flag_names() and "speed of light" in verdict.message
    assert verdict.timing.sol_fraction > SOL_MARGIN
    assert asked == [False, True], "measured again before rejecting"


def test_a_roof_measured_on_a_busy_device_is_measured_again_before_it_rejects_an_honest_kernel(evaluator):
    # As if the peaks had been measured while other jobs held the CPU: a roof far too low, stored where only the
    # parent writes. The honest kernel's time is "below" it, so the engine measures again, keeps the higher roof
    # and accepts; the stored roof has risen and stays risen.
    measured = evaluator.device_peaks(CONFIG)
    path = next((evaluator.trusted_root / "peaks").glob("*.json"))
    original = path.read_text()
    path.write_text(json.dumps(dict(measured, copy_bytes_per_s=1e6, cache_bytes=1)))
    try:
        verdict = evaluator.evaluate(PROBLEM, CANDIDATE)
        stored = json.loads(path.read_text())
    finally:
        path.write_text(original)
    assert verdict.accepted, verdict.message
    # Judged against the re-measured roof, not the low one. (The fraction itself may exceed 1: 2 MiB fits the
    # cache, which the copy roof's large buffers do not, so no bound rejects it; see the cache test below.)
    assert Flag.BEYOND_ROOFLINE.value not in verdict.flag_names()
    assert verdict.timing.peaks["copy_bytes_per_s"] > 1e8 and verdict.timing.peaks["cache_bytes"] > 1
    assert stored["copy_bytes_per_s"] > 1e8, "the re-measured roof replaced the low one"


def test_the_bound_leaves_room_for_what_a_cache_holds_and_for_measurement():
    peaks = {"copy_bytes_per_s": 1e9, "fp32_flops_per_s": 1e9, "cache_bytes": 1 << 20}
    work = {"bytes": 11 << 20, "flops": 0}  # 10 MiB beyond the cache: at least 10.49 ms at 1 GB/s
    for ms, rejected in ((10.0, False), (10.49 / SOL_MARGIN * 1.01, False), (10.49 / SOL_MARGIN * 0.9, True)):
        verdict = Verdict(Status.ACCEPTED, Stage.DONE, "")
        _speed_of_light(verdict, _timing(ms), work, peaks)
        assert (Flag.BEYOND_ROOFLINE in [f.flag for f in verdict.flags]) is rejected, ms
    in_cache = Verdict(Status.ACCEPTED, Stage.DONE, "")
    _speed_of_light(in_cache, _timing(1e-6), {"bytes": 1 << 19, "flops": 0}, peaks)
    assert not in_cache.flags, "a working set a cache can hold has no memory bound"


def test_a_median_that_noise_put_beyond_the_roof_is_not_rejected_where_its_rounds_reach_the_roof():
    # 10 MiB beyond the cache at 1 GB/s: at least 10.49 ms, so rejected under 6.99 ms. As on the H200 (an NVRTC row sum
    # read 0.0162 ms against its 0.1036 ms floor), rounds too short to tell from the harness's share scatter far below
    # what the call takes; seven rounds: the 90% interval of their median runs from the 1st to the 7th.
    peaks = {"copy_bytes_per_s": 1e9, "fp32_flops_per_s": 1e9, "cache_bytes": 1 << 20}
    work = {"bytes": 11 << 20, "flops": 0}
    scattered = Measured(candidate=[0.5, 1.0, 2.0, 3.0, 9.0, 10.0, 11.0])
    assert slowest_ms(scattered) == 11.0
    verdict = Verdict(Status.ACCEPTED, Stage.DONE, "")
    _speed_of_light(verdict, _timing(3.0), work, peaks, slowest_ms(scattered))
    assert not verdict.flags, "its median alone would be rejected; the rounds say the figure is noise"
    # Beyond the roof in most rounds: rejected, whatever one or two slow rounds say.
    beyond = Measured(candidate=[0.5] * 12 + [11.0] * 2)
    verdict = Verdict(Status.ACCEPTED, Stage.DONE, "")
    _speed_of_light(verdict, _timing(0.5), work, peaks, slowest_ms(beyond))
    assert [f.flag for f in verdict.flags] == [Flag.BEYOND_ROOFLINE] and "high end" not in verdict.flags[0].detail
    still = Measured(candidate=[0.5] * 10 + [2.0] * 4)  # its whole interval beyond the roof: rejected, and says so
    verdict = Verdict(Status.ACCEPTED, Stage.DONE, "")
    _speed_of_light(verdict, _timing(0.5), work, peaks, slowest_ms(still))
    assert [f.flag for f in verdict.flags] == [Flag.BEYOND_ROOFLINE]
    assert "at most 2.0000 ms at the high end of its interval" in verdict.flags[0].detail
    lifted = Measured(candidate=[0.5] * 10 + [11.0] * 4)  # enough slow rounds to lift the interval's high end
    verdict = Verdict(Status.ACCEPTED, Stage.DONE, "")
    _speed_of_light(verdict, _timing(0.5), work, peaks, slowest_ms(lifted))
    assert not verdict.flags
    # ...which leaves its speedup's interval (against an eager of 5 ms) as wide: never a headline, no speed reward.
    speedup, low, high = median_interval([5.0 / c for c in lifted.candidate])
    assert (high - low) / speedup > CONFIG.max_interval_width


def test_a_verdict_without_peaks_has_no_fraction():
    verdict = Verdict(Status.ACCEPTED, Stage.DONE, "")
    timing = _timing(1.0)
    _speed_of_light(verdict, timing, {"bytes": 1 << 30, "flops": 0}, None)
    assert timing.sol_fraction is None and not verdict.flags and dataclasses.asdict(timing)["peaks"] == {}
