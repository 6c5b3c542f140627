"""What a compiled extension calls in PyTorch past the dispatcher's Python key, read from its binary's mangled names
(agent/engine/build/native_calls.py)."""
from agent.engine.build.native_calls import mangled_paths, native_calls

OPS = {"_softmax", "softmax", "add", "mm", "empty", "sum"}
ALLOWED = {"mm", "empty"}


def _is_op(name: str) -> bool:
    return name in OPS


def _blob(*names: str) -> bytes:
    # As a binary holds them: NUL-separated in its string tables, among other bytes.
    return b"\x7fELF\x00junk\x00" + b"\x00".join(n.encode() for n in names) + b"\x00tail"


def test_names_are_read_by_their_length_prefixes():
    paths = mangled_paths(_blob("_ZN2at4_ops8_softmax10redispatchEN3c1014DispatchKeySetERKNS_6TensorElb"))
    assert ("at", "_ops", "_softmax", "redispatch") in paths


def test_a_forbidden_op_called_past_the_python_key_or_by_its_kernel_is_found():
    found = native_calls(_blob("_ZN2at4_ops8_softmax10redispatchEN3c1014DispatchKeySetERKNS_6TensorElb",
                               "_ZN2at3cpu3sumERKNS_6TensorE",
                               "_ZN2at6native11softmax_cpuERKNS_6TensorElb",
                               "_ZN2at4_ops10add_Tensor10redispatchEN3c1014DispatchKeySetE"), ALLOWED, _is_op)
    assert found == ["_softmax (at::_ops::_softmax::redispatch)", "add (at::_ops::add_Tensor::redispatch)",
                     "softmax (at::native::softmax_cpu)", "sum (at::cpu::sum)"]


def test_a_forbidden_op_through_the_dispatcher_and_the_dispatchers_own_controls_are_found():
    # at::_softmax through the dispatcher is recorded at run time, unless the Python key is off around the call (a guard
    # in Python shows no symbol): the binary names it either way. Key guards and operator lookups by name are found too.
    found = native_calls(_blob("_ZN2at4_ops8_softmax4callERKNS_6TensorElb",
                               "_ZN3c104impl23ExcludeDispatchKeyGuardC1ENS_14DispatchKeySetE",
                               "_ZN3c1010Dispatcher17findSchemaOrThrowEPKcS2_"), ALLOWED, _is_op)
    assert found == ["_softmax (at::_ops::_softmax::call)", "the dispatcher itself (c10::Dispatcher::findSchemaOrThrow)",
                     "the dispatcher itself (c10::impl::ExcludeDispatchKeyGuard)"]


def test_allowed_ops_memory_ops_and_helpers_are_not_findings():
    found = native_calls(_blob("_ZN2at4_ops2mm4callERKNS_6TensorES4_",  # an allowed op
                               "_ZN2at4_ops2mm10redispatchEN3c1014DispatchKeySetE",
                               "_ZN2at4_ops10empty_like4callERKNS_6TensorE",  # empty: allowed here
                               "_ZN2at4cuda20getCurrentCUDAStreamEa",  # a utility, not an op
                               "_ZN2at6native10cpu_kernelE",  # a helper whose first word is no op
                               "_ZN3c1019UndefinedTensorImpl10_singletonE"), ALLOWED | {"empty_like"}, _is_op)
    assert found == []


def test_the_interpreters_hooks_are_found_by_their_c_names_and_their_kin_by_whole_names_only():
    # A profile function set from C++ (PyEval_SetProfile, no Python object: sys.getprofile() reads None) ran F.silu where
    # both in-process records are off the stack (the seventh red team).
    found = native_calls(b"\0PyEval_SetProfile\0Py_AddPendingCall\0PyEval_SetTraceAllThreads\0", ALLOWED, _is_op)
    assert found == ["the interpreter's hooks (PyEval_SetProfile)", "the interpreter's hooks (PyEval_SetTraceAllThreads)",
                     "the interpreter's hooks (Py_AddPendingCall)"]
    assert native_calls(b"\0PyEval_SetProfileX\0my_PyEval_SetTrace\0PyGILState_Ensure\0", ALLOWED, _is_op) == []


def test_the_switches_of_the_record_functions_the_aten_observer_runs_on_are_found():
    # at::enableRecordFunction(false) (RecordFunctionGuard's constructor calls it) blinds the ATen observer on a thread;
    # a callback removed by its handle, or all of them cleared, blinds it everywhere (evaluate/aten_watch.py).
    found = native_calls(_blob("_ZN2at20enableRecordFunctionEb", "_ZN2at14removeCallbackEm", "_ZN2at14clearCallbacksEv"),
                         ALLOWED, _is_op)
    assert found == ["the record functions the ATen observer runs on (at::clearCallbacks)",
                     "the record functions the ATen observer runs on (at::enableRecordFunction)",
                     "the record functions the ATen observer runs on (at::removeCallback)"]
    # Reading whether they are on, or adding a callback of its own (a profiler's), switches nothing off.
    assert native_calls(_blob("_ZN2at23isRecordFunctionEnabledEv", "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE"),
                        ALLOWED, _is_op) == []


def test_a_threads_dispatch_state_set_wholesale_is_found():
    # An at::ThreadLocalState captured at import (record functions off on the harness's thread then) and set back around
    # the forward's PyTorch calls blinded the ATen observer and the census at once (the ninth red team's c3).
    found = native_calls(_blob("_ZN2at16ThreadLocalStateC1Ev", "_ZN2at16ThreadLocalState19setThreadLocalStateERKS0_",
                               "_ZN2at4impl22PythonTorchFunctionTLS9set_stateERKS1_"), ALLOWED, _is_op)
    assert found == ["a thread's dispatch state set wholesale (at::ThreadLocalState)",
                     "a thread's dispatch state set wholesale (at::impl::PythonTorchFunctionTLS)"]


def test_an_op_looked_up_in_the_jits_operator_registry_is_found():
    # torch::jit::getAllOperatorsFor gave the ninth red team's c7 aten::silu with no at::_ops name in its binary.
    found = native_calls(_blob("_ZN5torch3jit18getAllOperatorsForEN3c106SymbolE"), ALLOWED, _is_op)
    assert found == ["the dispatcher itself (torch::jit::getAllOperatorsFor: an op looked up by name)"]


def test_pytorchs_kernels_through_the_aot_inductor_c_shim_are_found():
    # Some shims call the backend's kernel directly, past the dispatcher (the ninth red team's c11).
    found = native_calls(b"\0aoti_torch_cpu_mul_Tensor\0aoti_torch_cuda_add_Tensor\0my_aoti_torch_cpu_x\0", ALLOWED, _is_op)
    assert found == ["PyTorch's kernels through the AOTInductor C shim (aoti_torch_cpu_mul_Tensor)",
                     "PyTorch's kernels through the AOTInductor C shim (aoti_torch_cuda_add_Tensor)"]
