"""Progress reports (agent/engine/evaluate/progress.py): a watcher sees each phase with the seconds since the
evaluation began; one that fails is logged and never raised into the evaluation. The phases of a real evaluation are
checked in test_variants.py, on its evaluator."""
from __future__ import annotations

import logging
import time

from agent.engine.evaluate.progress import PHASES, SILENT, Progress


def test_a_watcher_sees_each_phase_with_the_seconds_since_the_start():
    seen: list[tuple[str, str, float]] = []
    progress = Progress(lambda *phase: seen.append(phase))
    progress("plan", "planning")
    time.sleep(0.05)
    progress("build", "building")
    assert [(p, w) for p, w, _ in seen] == [("plan", "planning"), ("build", "building")]
    assert 0 <= seen[0][2] < seen[1][2] and seen[1][2] >= 0.05
    assert {"plan", "build", "timing"} <= set(PHASES)


def test_a_failing_watcher_is_logged_and_the_evaluation_goes_on(caplog):
    def broken(*_: object) -> None:
        raise OSError("pipe closed")

    with caplog.at_level(logging.WARNING, logger="agent.engine.evaluate.progress"):
        Progress(broken)("timing", "timing round 1")
    assert "a progress watcher failed on phase timing" in caplog.text


def test_nobody_watching_costs_nothing():
    assert SILENT("check", "trial 1") is None
