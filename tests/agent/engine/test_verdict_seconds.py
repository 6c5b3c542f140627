"""A verdict's device seconds are its session and ncu profile phases: the sub-phases inside the session are not
counted twice, the build (host CPU) not at all, and a stored verdict's junk entries count as nothing."""
from __future__ import annotations

import pytest

from agent.engine.verdict import Stage, Status, Verdict, device_seconds


def test_device_seconds_count_the_session_and_the_profile_once() -> None:
    verdict = Verdict(Status.ACCEPTED, Stage.DONE, "ok", seconds={
        "build": 30.0, "session": 4.0, "session.timing": 3.0, "session.reference.setup": 0.5, "profile": 2.0,
        "total": 36.0})
    assert verdict.device_seconds() == pytest.approx(6.0)


@pytest.mark.parametrize("seconds", [None, [], {"session": "x"}, {"session": "inf"}, {"session": -5.0}])
def test_unreadable_stored_seconds_count_as_nothing(seconds: object) -> None:
    assert device_seconds(seconds) == 0.0  # type: ignore[arg-type]
