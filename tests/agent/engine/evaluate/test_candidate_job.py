"""The op census in the candidate's job: armed before the import, it counts the checked calls and, pushed again around
each one, the timed calls too (a forward that runs its kernel while checked and PyTorch once timed is found); ops
called by their overloads, and the PyTorch calls of Python kernels registered with torch.library, included."""
import torch

from agent.engine.evaluate.candidate_job import _aten_name, _Census, _checked_outputs
from agent.engine.evaluate.guards import OpRecorder
from agent.engine.evaluate.python_kernels import watch_python_kernels

X = torch.randn(64)
SHAPES = [(X.shape, X.dtype)]


def _census() -> _Census:
    census = _Census(frozenset({"empty_like"}), "cpu")  # pushed on the mode stack, as before the candidate's import
    with census.forward():
        torch.empty_like(X)
    census.canary()
    assert census.finish() == [], "an allowed op in a checked call is no finding"
    return census


def test_pytorch_compute_in_timed_calls_only_is_found_after_the_batch():
    census = _census()
    calls = 0

    def forward(x):
        nonlocal calls
        calls += 1
        return torch.sigmoid(x) if calls > 2 else torch.empty_like(x)

    timed = _checked_outputs(forward, SHAPES, census)
    timed(X), timed(X)
    assert census.timed_findings() == [], "only allowed ops so far"
    timed(X)
    found = census.timed_findings()
    assert [f["flag"] for f in found] == ["forbidden_torch_op"] and "in timed calls: sigmoid" in found[0]["detail"]
    assert census.timed_findings() == [], "reported once; the verdict keeps it"


def test_the_harness_work_between_timed_calls_is_not_counted_and_does_not_pass_through_the_census():
    census = _census()
    timed = _checked_outputs(lambda x: torch.empty_like(x), SHAPES, census)
    timed(X)
    torch.sigmoid(X)  # the harness's own work (keyed inputs, projections) between the calls
    assert torch.overrides._get_current_function_mode_stack() == [], "off the stack between the calls"
    assert census.timed_findings() == []


def test_a_census_switched_off_inside_the_timed_calls_is_a_finding():
    census = _census()
    census.__enter__ = lambda: census  # as a candidate could: the harness's push made a no-op
    census.__exit__ = lambda *exc: None
    timed = _checked_outputs(lambda x: torch.sigmoid(x), SHAPES, census)
    timed(X)
    found = census.timed_findings()
    assert [f["flag"] for f in found] == ["forbidden_torch_op"] and "switched off" in found[0]["detail"]


def test_every_timed_call_of_a_forbidden_op_is_counted_however_often_the_census_has_named_it_before():
    census = _census()
    timed = _checked_outputs(lambda x: torch.sigmoid(torch.empty_like(x)), SHAPES, census)
    for _ in range(3):
        timed(X)
    assert census.forbidden_timed == {"sigmoid": 3}, "allowed empty_like not counted; sigmoid once a call"
    assert "sigmoid" in census.timed_findings()[0]["detail"]


def test_with_every_op_allowed_the_timed_calls_pass_through_no_census():
    census = _Census(frozenset({"*"}), "cpu")  # a sanity sweep's problem-as-candidate (allow_any_torch_op)
    assert census.finish() == []
    stacks = []

    def forward(x):
        stacks.append(list(torch.overrides._get_current_function_mode_stack()))
        return torch.sigmoid(x)

    timed = _checked_outputs(forward, SHAPES, census)
    timed(X)
    assert stacks == [[]], "nothing it could find, so nothing it costs the candidate's calls"
    assert census.timed_findings() == [] and census.forbidden_timed == {}


def test_an_op_called_by_its_overload_is_counted_by_its_packets_name():
    census = _census()
    timed = _checked_outputs(lambda x: torch.ops.aten.sigmoid.default(torch.ops.aten.empty_like.default(x)), SHAPES,
                             census)
    timed(X)
    assert census.forbidden_timed == {"sigmoid": 1}, "ATen's overload named as its op; allowed empty_like not counted"
    assert _aten_name(torch.ops.prims.exp.default) == "exp", "prims compute too"


def _watched(monkeypatch) -> None:
    """The candidate's job installs this before the import; the test restores the binding afterwards."""
    for method in ("impl", "fallback"):
        monkeypatch.setattr(torch._C._DispatchModule, method, getattr(torch._C._DispatchModule, method))


def test_pytorch_calls_inside_a_registered_python_kernel_are_counted_by_both_records(monkeypatch):
    _watched(monkeypatch)
    census = _Census(frozenset({"empty_like"}), "cpu")
    watch_python_kernels(census.rearm)

    @torch.library.custom_op("ks_test_census::hidden_sigmoid", mutates_args=())
    def hidden_sigmoid(x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)

    library = torch.library.Library("ks_test_census", "FRAGMENT")
    library.define("hidden_tanh(Tensor x) -> Tensor")
    library.impl("hidden_tanh", lambda x: torch.tanh(x), "CompositeExplicitAutograd")
    recorder = OpRecorder(frozenset({"empty_like"}))
    with torch.no_grad(), recorder, census.forward(recorder):
        y = torch.ops.ks_test_census.hidden_tanh(hidden_sigmoid(X))
    census.canary()
    assert torch.allclose(y, torch.tanh(torch.sigmoid(X))), "the kernels ran as registered"
    assert set(recorder.forbidden) == {"sigmoid", "tanh"}, "the ATen recorder saw inside both kernels"
    assert "sigmoid x1" in census.finish()[0]["detail"]
    timed = _checked_outputs(lambda x: hidden_sigmoid(x), SHAPES, census)
    timed(X)
    assert census.forbidden_timed == {"sigmoid": 1}, "and the census in a timed call"
    before = dict(census.forbidden_timed)
    hidden_sigmoid(X)  # the harness's own call of the op, outside any forward
    assert census.forbidden_timed == before
