"""What the reference's job does inside a timed batch command (agent/engine/evaluate/reference_job.py)."""
import pytest
import torch

import agent.engine.evaluate.reference_job as reference_job


def _state(device: str) -> reference_job._State:
    state = reference_job._State.__new__(reference_job._State)  # no problem needed: only the batch commands are used
    state.device, state.parked, state.probe_cycles, state.kernels = device, False, 0, None
    state.model, state.compiled, state.stand_ins, state.inputs, state.base_calls = None, None, [], {}, []
    state.pools, state.noise, state.wide_noise = object(), None, {}
    return state


@pytest.mark.parametrize("model", ["eager", "null"])
def test_a_timed_batch_runs_only_the_calls_and_the_gpu_probe_comes_in_the_ping_before_it(monkeypatch, model):
    # The parent's clock times the batch command whole. The candidate's batch command runs only its calls, so the
    # reference's (the null batch's above all, which is taken off the candidate's time) must hold nothing else: a
    # device probe inside it made identical code read up to 1.075x on the H100 (docs/benchmarks.md §15, session 17).
    state = _state("cuda")
    ran: list[str] = []
    monkeypatch.setattr(reference_job, "run_batch_figures",
                        lambda fn, bases, keys, device, pools: (ran.append("calls") or {}, None))
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


def test_the_check_of_a_candidates_calls_comes_from_the_eager_batch_that_ran_the_same_keys_first(monkeypatch):
    # On a GPU the round's eager batch runs every key the candidate's did, and its fused projections carry the bound's
    # sums: the check of the candidate's calls is read from them instead of running the reference again.
    import torch

    from agent.engine.evaluate.keyed import bound_of_figures

    state = _state("cuda")
    state.stand_ins, state.stand_in_shapes, state.tolerances = [torch.zeros(3)], [], (None, None)
    figures = torch.tensor([[[1.5, 4.0, 2.0, 3.0, 1.0, 0.5]], [[-2.5, 9.0, 3.0, 3.0, 2.0, 1.5]],
                            [[0.25, 1.0, 1.0, 3.0, 0.5, 0.5]]], dtype=torch.float64)
    state.eager_figures = ([5, 6, 7], figures)
    reran: list[list[int]] = []
    monkeypatch.setattr(reference_job._State, "verify", lambda self, keys: reran.append(keys) or {"expected": "again"})

    checks = state.handle({"cmd": "expected", "keys": [5, 6]})
    assert checks["expected"] == [[1.5], [-2.5]]
    assert checks["bounds"] == [[bound_of_figures([4.0, 2.0, 3.0, 1.0, 0.5], torch.float32, 3, None, None)],
                                [bound_of_figures([9.0, 3.0, 3.0, 2.0, 1.5], torch.float32, 3, None, None)]]
    assert checks["bounds"][0][0] != checks["bounds"][1][0] and not reran
    assert state.handle({"cmd": "expected", "keys": [6, 7]}) == {"expected": "again"}, "not the eager batch's first keys"
    assert state.handle({"cmd": "expected", "keys": [5, 6, 7, 8]}) == {"expected": "again"}, "more keys than it ran"
    assert reran == [[6, 7], [5, 6, 7, 8]]


@pytest.mark.parametrize("forward, allowed", [
    (lambda x: torch.clamp(x, -20, 20), [1, -1]),  # finite at any scale: both signs
    (lambda x: torch.log(x), [1]),  # positive inputs: x100 stays in the domain, x-100 leaves it
    (lambda x: torch.exp(x), [-1]),  # e^(100 x) overflows where e^x did not: only the shrinking side
    (lambda x: torch.exp(x) * torch.log(x), []),
])
def test_a_wide_call_takes_only_the_signs_that_keep_the_references_outputs_finite(forward, allowed):
    from agent.engine.evaluate.keyed import Pools

    state = _state("cpu")
    state.payload, state.ill_conditioned, state.model = {"wide_calls": True}, False, forward
    g = torch.Generator().manual_seed(0)
    state.inputs = {0: [torch.rand(64, 64, generator=g) + 0.5], 1: [torch.rand(64, 64, generator=g) + 0.5]}
    state.base_calls, state.pools = [0, 1], Pools(7)
    with torch.no_grad():
        assert state._wide_signs() == allowed
    state.payload = {"wide_calls": False}
    assert state._wide_signs() == []
    state.payload = {"wide_calls": True}
    state.inputs = {0: [torch.arange(64)], 1: [torch.arange(64) + 1]}  # indices only: nothing to scale
    assert state._wide_signs() == []


def test_an_ill_conditioned_reference_keeps_its_wide_calls_each_checked_with_the_noise_of_its_own_scale():
    # Whether a checked call finds the reference ill-conditioned is the candidate's choice (an exact log1p fails the
    # strict check against eager's log(1 + x)). Wide calls used to be dropped there, and a clamp skipped in the timed
    # calls was accepted: they stay, with the reference's own float64 error measured at their scale.
    from agent.engine.evaluate.exact import Float64Reference
    from agent.engine.evaluate.keyed import Pools, is_wide, wide_sign
    from agent.engine.sandbox import Limits

    state = _state("cpu")
    state.model = lambda x: torch.clamp(torch.sign(x) * torch.log(1 + x.abs()), -1e-4, 1e-4)
    state.payload, state.ill_conditioned = {"wide_calls": True}, True
    state.float64 = Float64Reference(state.model, "cpu", Limits(wall_seconds=60))
    g = torch.Generator().manual_seed(0)
    state.inputs = {0: [torch.randn(64, 64, generator=g) * 1e-5], 1: [torch.randn(64, 64, generator=g) * 1e-5]}
    state.base_calls, state.pools = [0, 1], Pools(7)
    with torch.no_grad():
        state._measure_noise()
        state.pools.wide = tuple(state._wide_signs())
    assert state.pools.wide == (1, -1)
    assert set(state.wide_noise) == {1, -1} and state.noise is not None
    # x100 clamps almost every element to +-1e-4, exactly in float32 and float64: far less noise than on the bases.
    assert all(0 <= state.wide_noise[s][0] < state.noise[0] for s in (1, -1)), (state.wide_noise, state.noise)
    plain = next(k for k in range(100) if not is_wide(k))
    wide = next(k for k in range(100) if is_wide(k))
    assert state._noise_for(plain) is state.noise
    assert state._noise_for(wide) is state.wide_noise[wide_sign(wide, state.pools.wide)]
    assert "its checks widened by the reference's own float64 error at that scale" in reference_job._wide_words(
        state.pools.wide, True, state.wide_noise)


def _memfd_with(tensor: torch.Tensor, size: int) -> tuple[int, list[dict]]:
    import os

    from agent.engine.evaluate.tensor_file import TensorFileWriter

    fd = os.memfd_create("outputs")
    os.ftruncate(fd, size)
    writer = TensorFileWriter(fd)
    writer.put(["out", 0], tensor)
    return fd, writer.layout


def _whole_file(key: list, size: int) -> dict:
    return {"key": key, "shape": [size], "dtype": "torch.uint8", "offset": 0, "nbytes": size}


@pytest.mark.parametrize("claim, note", [
    # Eight more outputs than the reference has, each the whole file: mapped one by one, they once took the reference's
    # job past its address-space limit, and its death read as the engine's own lack of memory (a wrong candidate's
    # "incorrect" turned into "capacity"; the third red team's h1).
    (lambda layout, size: layout + [_whole_file(["out", 1 + j], size) for j in range(8)], "expected 1 output tensor(s), got 9"),
    # Its one output described as something else, as large as the file.
    (lambda layout, size: [_whole_file(["out", 0], size)], "expected shape (64, 64) torch.float32, got"),
    # An empty output of a shape torch cannot make: torch.empty raised TypeError, the reference's job died, and the
    # evaluation ended as the problem's failure (h1b).
    (lambda layout, size: layout + [{"key": ["out", 1], "shape": [0, 2 ** 64], "dtype": "torch.float32", "offset": 0,
                                     "nbytes": 0}], "a shape no tensor can have"),
])
def test_what_a_candidate_claims_about_its_outputs_fails_its_comparison_and_maps_nothing_the_reference_has_not(
        monkeypatch, claim, note):
    import os

    from agent.engine.evaluate.tensor_file import TensorFileReader

    state = _state("cpu")
    x = torch.randn(64, 64)
    state.model, state.inputs, state.tolerances, state.rejudge, state.random = (lambda t: t * 2), {0: [x]}, (None, None), False, False
    size = 4 << 20
    fd, layout = _memfd_with(x * 2, size)
    state.outputs_fd = fd
    mapped: list[tuple] = []
    real_get = TensorFileReader.get

    def get(self, key):
        found = real_get(self, key)
        if found is not None and found.device.type != "meta":
            mapped.append(tuple(key))
        return found

    monkeypatch.setattr(TensorFileReader, "get", get)
    try:
        honest = state.compare(0, layout)
        assert honest["comparison"]["passed"] and mapped == [("out", 0)]
        mapped.clear()
        forged = state.compare(0, claim(layout, size))
    finally:
        os.close(fd)
    assert not forged["comparison"]["passed"]
    assert note in forged["comparison"]["note"]
    assert mapped == [], "nothing the reference's outputs are not is mapped"


def test_two_equal_input_sets_are_told_apart_from_two_draws():
    from agent.engine.evaluate.reference_job import _same_values

    drawn = torch.Generator().manual_seed(1234)
    seeded = [torch.randn(4, 4, generator=drawn), 3]
    again = [torch.randn(4, 4, generator=torch.Generator().manual_seed(1234)), 3]
    assert _same_values(seeded, again), "a get_inputs that seeds itself returns the same set twice"
    assert not _same_values(seeded, [torch.randn(4, 4), 3])
    assert not _same_values([1, 2], [1, 2]), "no tensor: nothing the timed calls would mix"
