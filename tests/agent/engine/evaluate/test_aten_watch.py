"""The ATen observer (agent/engine/evaluate/aten_watch.py): a record-function callback of the whole process that sees
PyTorch's calls on every thread and inside every callback. Installing it is once per process and for good, so each
case runs in a process of its own."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.engine.evaluate import aten_watch
from agent.engine.evaluate.kernel_census import batch_token
from agent.engine.evaluate.config import CONV_OPS, GEMM_OPS

ROOT = Path(__file__).resolve().parents[4]

PRELUDE = """
import ctypes, json, sys, warnings
import torch, torch.nn.functional as F
from agent.engine.evaluate import aten_watch
from agent.engine.evaluate.kernel_census import batch_token
from agent.engine.evaluate.config import CONV_OPS, GEMM_OPS
payload = json.loads(sys.argv[1])
observer = aten_watch.start(payload)
x, w = torch.randn(8, 8), torch.randn(8, 8)
def report(name):
    print(json.dumps({name: [f["detail"] for f in observer.check()]}), flush=True)
"""


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("cache")
    return {"aten_watch": aten_watch.built(root), "allowed_ops": sorted(GEMM_OPS | CONV_OPS), "cache_root": str(root)}


def _run(payload: dict, body: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(body), json.dumps(payload)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict = {}
    for line in done.stdout.splitlines():
        out.update(json.loads(line))
    return out


def test_the_harness_threads_own_work_is_not_judged_and_an_armed_calls_allowed_ops_are_no_finding(payload):
    out = _run(payload, """
        F.silu(x)                      # the harness's own work between calls: not judged
        report("between calls")
        image, kernel, bias = torch.randn(1, 2, 5, 5), torch.randn(3, 2, 3, 3), torch.randn(3)
        observer.arm()
        y = torch.empty_like(x).copy_(torch.mm(x, w))
        F.conv2d(image, kernel, bias)  # its bias added inside it on some paths: the convolution's own internals
        observer.disarm()
        report("allowed")
        observer.arm()
        F.conv2d(image, kernel, bias).sigmoid()
        observer.disarm()
        report("beside")
    """)
    assert out["between calls"] == [] and out["allowed"] == []
    assert len(out["beside"]) == 1 and out["beside"][0].endswith("outside the allow-list: aten::sigmoid x1")


def test_compute_on_a_native_thread_is_a_finding_whenever_it_runs(payload):
    # A pthread made through ctypes, whose callback takes the GIL: no Python mode stack of the harness's is on it.
    out = _run(payload, """
        routine = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda _: F.silu(x) and None)
        libc, handle = ctypes.CDLL(None), ctypes.c_ulong()
        libc.pthread_create(ctypes.byref(handle), None, routine, None)
        libc.pthread_join(handle, None)
        report("thread")
    """)
    assert len(out["thread"]) == 1 and "aten::silu (on a thread of its own) x1" in out["thread"][0]


def test_compute_in_a_callback_inside_an_allowed_op_is_a_finding(payload):
    # torch.mm resizing its out= warns from C++, and a showwarning of the candidate's runs inside the call; the ATen
    # records are modes, off their stacks there, but the observer is beneath the dispatcher (the eighth red team's G2).
    out = _run(payload, """
        warnings.simplefilter("always")
        warnings.showwarning = lambda *a, **k: torch.tanh(x)
        observer.arm()
        torch.mm(x, w, out=torch.empty(3))
        observer.disarm()
        report("warning")
    """)
    assert len(out["warning"]) == 1 and "aten::tanh x1" in out["warning"][0]


def test_a_switch_the_harness_did_not_make_and_a_removed_callback_are_findings(payload):
    out = _run(payload, """
        observer.arm()
        torch.autograd._enable_record_function(False)   # blinds this thread: PyTorch's own switch, watched
        F.silu(x)
        torch.autograd._enable_record_function(True)
        observer.disarm()
        report("python switch")
        torch._C._autograd._clear_callbacks()           # removes every callback, the observer's too
        observer.arm()
        F.silu(x)
        observer.disarm()
        report("cleared")
    """)
    assert any("record functions were switched from Python (torch.autograd._enable_record_function)" in d
               for d in out["python switch"])
    assert any("its canary was not seen" in d for d in out["cleared"])


def test_the_module_switched_by_another_caller_is_a_finding(payload):
    # The module's own functions are reachable from the candidate's code (through the observer's objects): each switch
    # the harness did not make is counted in C++, where Python cannot take it back.
    out = _run(payload, """
        module = sys.modules.get("kstudio_aten_watch")
        assert module is None, "left in sys.modules"
        observer.arm()
        observer._disarm()             # as a candidate holding the observer would
        F.silu(x)
        observer._arm()
        observer.disarm()
        report("switched")
    """)
    assert any("switched on or off by code other than the harness's" in d for d in out["switched"])


def test_an_op_run_past_the_dispatchers_record_is_a_finding_unless_it_is_the_candidates_own(payload):
    # OpOverload.redispatch and a call by dispatch key run the kernel with no record function (the ninth red team's c1);
    # torch.library's autograd wrapper redispatches every custom op, so an op of the candidate's own may be.
    out = _run(payload, """
        keys = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
        observer.arm()
        torch.ops.aten.silu.default.redispatch(keys, x)
        torch.ops.aten.sigmoid.default._op_dk(torch._C.DispatchKey.CPU, x)
        observer.disarm()
        report("bypassed")
        lib = torch.library.Library("kstudio_test", "DEF")
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda t: torch.empty_like(t), "CPU")
        observer.arm()
        torch.ops.kstudio_test.twice.default.redispatch(keys, x)
        observer.disarm()
        report("own op")
        torch.ops.aten.silu.default.redispatch(keys, x)  # the harness's own time: not judged
        report("between calls")
    """)
    assert len(out["bypassed"]) == 1 and out["bypassed"][0].endswith(
        "(a redispatch, or a kernel by its dispatch key): aten::sigmoid x1, aten::silu x1")
    assert out["own op"] == [] and out["between calls"] == []


def test_a_garbage_collector_callback_of_the_candidates_is_a_finding(payload):
    # A collection set off by the harness's own allocations between calls runs it where the thread is not judged.
    out = _run(payload, """
        import gc
        report("before")
        gc.callbacks.append(lambda phase, info: None)
        report("added")
    """)
    assert out["before"] == [] and len(out["added"]) == 1 and "gc.callbacks" in out["added"][0]


def test_torch_tensors_own_methods_replaced_are_findings_and_pytorchs_own_imports_are_not(payload):
    # The harness calls them on outputs in its own time, where no record judges. Dynamo's and inductor's imports replace
    # module-level functions of PyTorch's (torch.manual_seed), which the harness reaches through pristine.py's copy.
    out = _run(payload, """
        import torch._dynamo, torch._inductor
        report("imports")
        detach = torch.Tensor.detach
        torch.Tensor.detach = lambda self: detach(self)
        print(json.dumps({"after call": observer.tensor_class_changed()}))
        torch.Tensor.detach = detach
        report("tensor")
    """)
    assert out["imports"] == []
    assert out["after call"] is True and "torch.Tensor's methods (changed by the time a call returned)" in out["tensor"][0]


def test_a_binary_that_is_not_the_parents_is_not_loaded(payload):
    forged = {**payload, "aten_watch": {**payload["aten_watch"], "sha256": "0" * 64}}
    with pytest.raises(RuntimeError, match="not the one the parent built"):
        aten_watch.start(forged)


def test_nothing_is_installed_where_every_op_is_allowed(payload):
    assert aten_watch.start({**payload, "allowed_ops": ["*"]}) is None


def test_the_parent_judges_the_observers_signed_counts_whatever_the_python_side_says(payload):
    # The harness's own Observer can be found through the garbage collector and switched off and on around F.silu
    # (the ninth red team's c5), which keeps the Python side's count of its switches right; the counts the native
    # module signs for the parent show the switches the harness did not make, and what ran while they were off
    # elsewhere is beyond the candidate's reach.
    secret = "5e" * 16
    keyed = {**payload, "aten_watch": {**payload["aten_watch"], "secret": secret}}
    out = _run(keyed, """
        from agent.engine.evaluate.kernel_census import batch_token
        assert "secret" not in payload["aten_watch"]  # out of the payload before any candidate code could read it
        takes = []
        def call(fn, token):
            observer.arm()
            try:
                fn()
            finally:
                observer.disarm()
            observer.check()
            takes.append(observer.take(batch_token([token])))
        call(lambda: torch.mm(x, w), 1)  # honest: an allowed op
        def stepped_around():  # the candidate switching the harness's own observer
            observer.disarm(); F.silu(x); observer.arm()
        call(stepped_around, 2)
        call(lambda: F.silu(x), 3)  # PyTorch compute outside the allow-list, seen
        print(json.dumps({"takes": takes}))
    """)
    judge = aten_watch.WatchJudge(secret)
    honest, switched, silu = out["takes"]
    assert judge.reply({"aten_watch": honest}, batch_token([1]), 1) == []
    found = judge.reply({"aten_watch": switched}, batch_token([2]), 1)
    assert len(found) == 1 and "switched by code other than the harness's (6 switches where the harness made 4)" in found[0]
    found = judge.reply({"aten_watch": silu}, batch_token([3]), 1)
    assert len(found) == 1 and "aten::silu x1" in found[0]
    # forged or replayed counts, and none at all
    other = aten_watch.WatchJudge(secret)
    assert "not signed" in other.reply({"aten_watch": {**honest, "text": honest["text"] + "1\taten::mm\n"}},
                                       batch_token([1]), 1)[0]
    assert "another command" in other.reply({"aten_watch": honest}, batch_token([9]), 1)[0]
    assert "no ATen observer" in other.reply({}, batch_token([1]), 1)[0]
    assert aten_watch.WatchJudge(None).reply({}, batch_token([1]), 1) == []


def swapped_changed(signed: dict, secret: str) -> int:
    return aten_watch.read_counts(signed, secret, batch_token([3])).changed


def test_the_harnesss_own_code_replaced_after_the_import_is_in_the_signed_counts(payload):
    # The tenth red team: batch.derive wrapped to run F.silu in the harness's own time, the observer's captured arm
    # pointed at its disarm, gc.callbacks rebound, pristine's copy of torch patched: each keeps the switch count right
    # and is seen only as the harness's code changed, which the native module compares at every take.
    secret = "a7" * 16
    keyed = {**payload, "aten_watch": {**payload["aten_watch"], "secret": secret}}
    out = _run(keyed, """
        import gc
        from agent.engine.evaluate import guards, pristine  # loaded with the observer, before the watch
        from agent.engine.evaluate.kernel_census import batch_token
        takes = []
        def step(token):
            observer.arm(); observer.disarm(); observer.check()
            takes.append(observer.take(batch_token([token])))
        step(1)
        guards.bitwise_equal = lambda *a, **k: True
        step(2)
        observer._arm = observer._disarm
        pristine.torch.zeros = lambda *a, **k: None
        step(3)
        gc.callbacks = []
        step(4)
        print(json.dumps({"takes": takes}))
    """)
    judge = aten_watch.WatchJudge(secret)
    first, derived, swapped, rebound = out["takes"]
    assert judge.reply({"aten_watch": first}, batch_token([1]), 1) == []
    assert "guards.bitwise_equal" in judge.reply({"aten_watch": derived}, batch_token([2]), 1)[0]
    found = judge.reply({"aten_watch": swapped}, batch_token([3]), 1)[0]
    assert "Observer (its instance)._arm" in found and "pristine.torch.zeros" in found
    rebound_counts = aten_watch.read_counts(rebound, secret, batch_token([4]))
    assert rebound_counts.changed == swapped_changed(swapped, secret) + 1  # names past the first four are counted only
