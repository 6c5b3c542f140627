"""The op census in the candidate's job: armed before the import, it counts the checked calls and, pushed again around
each one, the timed calls too (a forward that runs its kernel while checked and PyTorch once timed is found); ops
called by their overloads, and the PyTorch calls of Python kernels registered with torch.library, included."""
import torch

from agent.engine.evaluate.candidate_job import _aten_name, _Census, _checked_outputs
from agent.engine.evaluate.guards import OpRecorder
from agent.engine.evaluate.census_reach import watch_python_kernels, watch_threads

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


def test_pytorch_calls_on_a_thread_the_candidate_started_are_counted(monkeypatch):
    import _thread
    import threading
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(_thread, "start_new_thread", _thread.start_new_thread)
    monkeypatch.setattr(threading, "_start_new_thread", threading._start_new_thread)
    census = _census()
    watch_threads(census)
    pool = ThreadPoolExecutor(max_workers=1)  # made at import, before any call: no background_thread finding
    pool.submit(lambda: None).result()
    try:
        timed = _checked_outputs(lambda x: pool.submit(torch.sigmoid, x).result(), SHAPES, census)
        timed(X)
        assert census.forbidden_timed == {"sigmoid": 1}, "the pool's thread carries the census"
        pool.submit(torch.tanh, X).result()  # between the calls: nothing counted
        assert census.forbidden_timed == {"sigmoid": 1}
    finally:
        pool.shutdown()


class _Box:
    """A tensor-like of the candidate's own: its __torch_function__ takes over whatever PyTorch call it is passed to."""

    def __init__(self, tensor):
        self.tensor = tensor

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch.sigmoid(args[0].tensor)


def test_a_call_taken_over_by_a_torch_function_of_the_candidates_own_is_counted_and_a_parameter_is_not():
    census = _census()
    parameter = torch.nn.Parameter(torch.randn(64))
    timed = _checked_outputs(lambda x: torch.clone(_Box(x)) if x is X else torch.empty_like(parameter.detach()),
                             SHAPES, census)
    timed(X)
    assert census.forbidden_timed.get("__torch_function__ of _Box") == 1, census.forbidden_timed
    timed(X.clone())
    assert census.forbidden_timed.get("__torch_function__ of _Box") == 1, census.forbidden_timed
    assert not any("Parameter" in name for name in census.forbidden_timed), "nn.Parameter's is PyTorch's own"


def test_pytorch_functions_with_no_aten_op_of_their_name_and_pytorchs_other_ops_are_counted():
    census = _census()
    weight, bias, row = torch.randn(8, 64), torch.randn(8), torch.randn(1, 64)
    forwards = [lambda x: torch.nn.functional.softsign(x), lambda x: 1 / x,
                lambda x: torch.ops.mkldnn._linear_pointwise(row, weight, bias, "relu", [], "")]
    for forward in forwards:
        _checked_outputs(forward, [], census)(X)
    assert set(census.forbidden_timed) == {"softsign", "div", "mkldnn::_linear_pointwise"}, census.forbidden_timed
    recorder = OpRecorder(frozenset())
    with torch.no_grad(), recorder:
        forwards[2](X)
    assert "mkldnn::_linear_pointwise" in recorder.forbidden


class _Wrapped(torch.Tensor):
    """A wrapper subclass: __torch_function__ disabled as nn.Parameter's is, its __torch_dispatch__ computing instead."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return torch.sigmoid(args[0].inner)


def test_a_call_taken_over_beneath_the_dispatcher_by_a_subclass_is_counted_by_both_records():
    census = _Census(frozenset({"clone"}), "cpu")  # on the mode stack through the checked calls, as in the job
    recorder = OpRecorder(frozenset({"clone"}))
    with torch.no_grad(), recorder, census.forward(recorder):
        torch.clone(_Wrapped(X))
    census.canary()
    assert "__torch_dispatch__ of _Wrapped" in recorder.forbidden, recorder.forbidden
    assert "__torch_dispatch__ of _Wrapped x1" in census.finish()[0]["detail"]


class _PassesForPlain(torch._C._TensorMeta):
    """A metaclass whose classes compare equal to torch.Tensor, hash alike, and so were members of a set of plain types."""

    def __eq__(cls, other):
        return other is torch.Tensor or cls is other

    def __hash__(cls):
        return hash(torch.Tensor)


class _Disguised(torch.Tensor, metaclass=_PassesForPlain):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return torch.sigmoid(args[0].as_subclass(torch.Tensor))


class _DisguisedWrapped(_Wrapped, metaclass=_PassesForPlain):
    pass


def test_a_type_equal_to_torch_tensor_by_its_metaclass_is_still_the_candidates_own():
    census = _census()
    _checked_outputs(lambda x: torch.clone(x.as_subclass(_Disguised)), SHAPES, census)(X)
    _checked_outputs(lambda x: torch.clone(_DisguisedWrapped(x)), SHAPES, census)(X)
    assert {"__torch_function__ of _Disguised", "__torch_dispatch__ of _DisguisedWrapped"} <= set(census.forbidden_timed), \
        census.forbidden_timed
    recorder = OpRecorder(frozenset({"clone"}))
    with torch.no_grad(), recorder:
        torch.clone(_DisguisedWrapped(X))
    assert "__torch_dispatch__ of _DisguisedWrapped" in recorder.forbidden, recorder.forbidden


def test_pytorch_compute_in_a_process_forked_from_the_job_fails_there():
    import os

    census = _Census(frozenset({"empty_like"}), "cpu")  # on the stack, as at the import or in a forward
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what watch_forks runs first, then a helper's fallback
        census.in_child()
        try:
            torch.sigmoid(X)
            os.write(write, b"ran")
        except RuntimeError as exc:
            os.write(write, b"refused" if "forked from the candidate's job" in str(exc) else b"other")
        os._exit(0)
    os.waitpid(pid, 0)
    census.canary()
    census.finish()
    assert os.read(read, 16) == b"refused"
    os.close(read), os.close(write)


class _Index:
    """An index that computes: PyTorch calls __index__ from inside Tensor.__getitem__, where the census is off the stack."""

    def __index__(self) -> int:
        torch.softmax(X, 0)
        return 0


def test_an_argument_that_is_not_a_value_of_pythons_or_pytorchs_own_is_counted_however_nested():
    census = _census()
    census.allowed = census.allowed | {"view"}
    timed = _checked_outputs(lambda x, index=None, shape=(64,): (x[index] if index is not None else x.view(shape),
                                                                  torch.empty_like(x))[1], SHAPES, census)
    timed(X, _Index())
    assert list(census.forbidden_timed) == ["an argument of type _Index (its methods run inside the call, unseen)"]
    assert "softmax" not in census.forbidden_timed, "what __index__ ran is unseen: the argument is the finding"
    census.forbidden_timed.clear()
    for plain in ((64,), [1, 64], torch.Size([64]), (8, [8][0])):  # Python's and PyTorch's own values: no finding
        timed(X, None, plain)
    assert census.forbidden_timed == {}
    timed(X, (slice(0, 2),))  # an index tuple: looked into, nothing found
    assert census.forbidden_timed == {}
    timed(X, (_Index(),))
    assert list(census.forbidden_timed) == ["an argument of type _Index (its methods run inside the call, unseen)"]
    census.forbidden_timed.clear()
    timed(X, slice(_Index(), None))  # a slice holds any object: PyTorch calls its __index__ inside __getitem__
    assert list(census.forbidden_timed) == ["an argument of type _Index (its methods run inside the call, unseen)"]


def test_installing_an_interpreter_hook_is_a_finding_wherever_it_happens(monkeypatch):
    import sys

    from agent.engine.evaluate.census_reach import watch_interpreter_hooks

    monkeypatch.setattr(sys, "setprofile", sys.setprofile)  # put back after the test: watch_ wraps in place
    monkeypatch.setattr(sys, "settrace", sys.settrace)
    census = _Census(frozenset({"empty_like"}), "cpu")
    watch_interpreter_hooks(census.hook_installed)
    sys.setprofile(None)  # taking one off is no finding
    sys.setprofile(lambda frame, event, arg: None)  # at import: the checked calls' finding
    sys.setprofile(None)
    with census.forward():
        torch.empty_like(X)
    census.canary()
    found = census.finish()
    assert len(found) == 1 and "sys.setprofile (an interpreter hook" in found[0]["detail"], found
    timed = _checked_outputs(lambda x: sys.settrace(lambda *a: None) or sys.settrace(None) or torch.empty_like(x),
                             SHAPES, census)
    timed(X)
    found = census.timed_findings()
    assert len(found) == 1 and "sys.settrace (an interpreter hook" in found[0]["detail"], found


def test_a_dispatch_mode_of_the_candidates_own_on_the_stack_is_counted_in_checked_and_timed_calls():
    # Entered at import and never left, its handler ran F.silu for every call beneath both records (the eighth red team).
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Mine(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    name = "a dispatch mode of the candidate's own (its handler runs beneath both records)"
    census = _census()
    timed = _checked_outputs(lambda x: torch.empty_like(x), SHAPES, census)
    timed(X)
    assert census.forbidden_timed == {}, "the harness's own recorder is no finding, nor is an empty stack"
    with _Mine():
        timed(X)
    assert census.forbidden_timed.get(name) == 2, census.forbidden_timed  # before the call, and at its empty_like
    census = _Census(frozenset({"empty_like"}), "cpu")
    recorder = OpRecorder(frozenset())
    with _Mine(), recorder, census.forward(recorder):
        census.count_modes(census.FORWARD)
    assert census.forbidden.get(name) == 1


def test_a_symint_is_no_plain_value():
    # torch.SymInt can wrap any Python object, whose methods PyTorch calls inside the op (the eighth red team's G6).
    from agent.engine.evaluate.candidate_job import _PLAIN_VALUE_IDS

    assert id(torch.SymInt) not in _PLAIN_VALUE_IDS and id(int) in _PLAIN_VALUE_IDS


def test_a_timed_output_carrying_attributes_of_its_own_ends_the_batch_before_any_of_its_methods_runs():
    # Its instance attributes shadow the methods the harness calls after the call, in its own time (the ninth red team's
    # c6: clone and untyped_storage filled the output with F.silu(x) + bias there).
    import pytest

    from agent.engine.evaluate.candidate_job import _TimedOutputs

    census = _census()
    ran: list[str] = []

    def forward(x):
        y = torch.empty_like(x)
        y.untyped_storage = lambda: ran.append("untyped_storage")
        return y

    timed = _checked_outputs(forward, SHAPES, census)
    with pytest.raises(_TimedOutputs, match="carries attributes of its own") as raised:
        timed(X)
    assert raised.value.flag == "not_a_plain_tensor" and ran == []
