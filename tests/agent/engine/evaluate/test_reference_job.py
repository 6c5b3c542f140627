"""What the reference's job does inside a timed batch command (agent/engine/evaluate/reference_job.py)."""
import pytest

import agent.engine.evaluate.reference_job as reference_job


def _state(device: str) -> reference_job._State:
    state = reference_job._State.__new__(reference_job._State)  # no problem needed: only the batch commands are used
    state.device, state.parked, state.probe_cycles = device, False, 0
    state.model, state.compiled, state.stand_ins, state.inputs, state.base_calls = None, None, [], {}, []
    state.pools = object()
    return state


@pytest.mark.parametrize("model", ["eager", "null"])
def test_a_timed_batch_runs_only_the_calls_and_the_gpu_probe_comes_in_the_ping_before_it(monkeypatch, model):
    # The parent's clock times the batch command whole. The candidate's batch command runs only its calls, so the
    # reference's (the null batch's above all, which is taken off the candidate's time) must hold nothing else: a
    # device probe inside it made identical code read up to 1.075x on the H100 (docs/benchmarks.md §15, session 17).
    state = _state("cuda")
    ran: list[str] = []
    monkeypatch.setattr(reference_job, "run_batch", lambda fn, bases, keys, device, pools: ran.append("calls") or {})
    monkeypatch.setattr(reference_job, "ping", lambda device: ran.append("ping") or {"ok": True})
    monkeypatch.setattr(reference_job._State, "_probe", lambda self: ran.append("probe") or 0.1)

    assert state.handle({"cmd": "batch", "model": model, "keys": [1, 2]}) == {}
    assert ran == ["calls"], "nothing but the calls inside the timed command"
    ran.clear()
    assert state.handle({"cmd": "ping", "probe": True}) == {"ok": True, "probe_ms": 0.1}
    assert ran == ["ping", "probe"]
    ran.clear()
    assert state.handle({"cmd": "ping"}) == {"ok": True} and ran == ["ping"], "a plain ping probes nothing"


def test_the_cpu_has_no_probe_to_take(monkeypatch):
    state = _state("cpu")
    monkeypatch.setattr(reference_job._State, "_probe", lambda self: pytest.fail("no device probe on the CPU"))
    assert state.handle({"cmd": "ping", "probe": True}) == {"ok": True}
