"""The candidate's and the reference's jobs take turns on the device through three pipes (handoff.py)."""
import os
import threading
import time

from agent.evaluate.handoff import CandidateSide, Pipes, ReferenceSide


def _sides(pipes: Pipes) -> tuple[CandidateSide, ReferenceSide]:
    return CandidateSide(*pipes.candidate_fds()), ReferenceSide(*pipes.reference_fds())


def test_the_candidate_times_only_after_the_reference_has_handled_everything_announced():
    pipes = Pipes()
    candidate, reference = _sides(pipes)
    seen: list[tuple[str, object]] = []
    handled = threading.Event()

    def follow() -> None:
        for event, value in reference.events():
            seen.append((event, value))
            if event == "timing":
                time.sleep(0.2)  # comparing what was announced
                handled.set()
                reference.open_gate()

    follower = threading.Thread(target=follow)
    follower.start()
    try:
        candidate.announce([{"key": ["trial", 0, 0]}])
        waited = candidate.wait_for_gate(10)
        assert handled.is_set(), "the gate opened before the reference was done"
        assert waited["waited_seconds"] >= 0.15 and not waited.get("timed_out")
        pipes.send_control([{"key": ["trial", 0, 0]}])
        follower.join(5)
        assert seen == [("entries", [{"key": ["trial", 0, 0]}]), ("timing", None),
                        ("control", [{"key": ["trial", 0, 0]}])]
    finally:
        pipes.close()


def test_a_reference_that_never_opens_the_gate_costs_the_candidate_only_its_bounded_wait():
    pipes = Pipes()
    candidate, _ = _sides(pipes)
    try:
        started = time.monotonic()
        waited = candidate.wait_for_gate(0.3)
        assert waited["timed_out"] and 0.25 <= time.monotonic() - started < 2
    finally:
        pipes.close()


def test_the_parent_opens_the_gate_for_a_reference_that_ended_early():
    pipes = Pipes()
    candidate, _ = _sides(pipes)
    try:
        pipes.open_gate()
        assert not candidate.wait_for_gate(5).get("timed_out")
    finally:
        pipes.close()


def _until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_garbage_from_the_candidate_stops_the_reading_of_progress_and_lets_the_candidate_time():
    pipes = Pipes()
    candidate, reference = _sides(pipes)
    events: list[tuple[str, object]] = []
    follower = threading.Thread(target=lambda: events.extend(reference.events()), daemon=True)
    follower.start()
    try:
        os.write(pipes.progress[1], b"\x00not json\n")
        _until(lambda: reference.problems)
        assert reference.problems and "not JSON" in reference.problems[0]
        assert not candidate.wait_for_gate(1).get("timed_out"), "the gate stayed shut after progress was dropped"
        pipes.send_control(None)
        follower.join(5)
        assert events == [("control", None)]
    finally:
        pipes.close()


def test_an_endless_line_is_given_up_on_after_a_megabyte():
    pipes = Pipes()
    _, reference = _sides(pipes)

    def endless() -> None:
        try:
            for _ in range(64):
                os.write(pipes.progress[1], b"x" * (1 << 16))
        except OSError:
            pass  # the pipes were closed under it

    events: list[tuple[str, object]] = []
    writer = threading.Thread(target=endless, daemon=True)
    follower = threading.Thread(target=lambda: events.extend(reference.events()), daemon=True)
    writer.start()
    follower.start()
    try:
        _until(lambda: reference.problems)
        assert reference.problems and "over 1 MiB" in reference.problems[0]
        assert reference.gate_opened
        pipes.send_control([])
        follower.join(5)
        assert events == [("control", [])]
    finally:
        pipes.close()
