"""Why the same tensor op cost 2.5 ms in one process and 11-20 ms in another (docs/benchmarks.md §15): glibc malloc's
moving mmap/trim thresholds. `python benchmarks/probes/allocator_probe.py {none,ext,rec,ext,rec} [--mallopt]`: the
steps import what the candidate's job imports before timing; --mallopt fixes the thresholds as the jobs now do."""
import sys, time, torch, ctypes
if "--mallopt" in sys.argv:
    sys.argv.remove("--mallopt"); libc = ctypes.CDLL("libc.so.6"); libc.mallopt(-3, 32 << 20); libc.mallopt(-1, 1 << 30)
torch.set_num_threads(1)
x = torch.randn(1024, 1024)
def bench():
    best = 1e9
    for _ in range(30):
        t = time.perf_counter()
        for _ in range(3): (x * torch.sigmoid(x) + 1)
        best = min(best, (time.perf_counter() - t) * 1000)
    return round(best, 2)
steps = sys.argv[1].split(",") if len(sys.argv) > 1 else []
if "ext" in steps:
    import torch.utils.cpp_extension  # noqa
if "mode" in steps:
    from torch.overrides import TorchFunctionMode
    class M(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    m = M(); m.__enter__(); (x * 2); m.__exit__(None, None, None)
if "rec" in steps:
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.dirname(__import__("os").path.abspath(__file__)))))
    from agent.engine.evaluate import guards
    r = guards.OpRecorder(frozenset())
    with r: x * 2
if "poison" in steps:
    b = [torch.full((4 << 20,), 0xFF, dtype=torch.uint8) for _ in range(4)]; del b
print(sys.argv[1:], bench())
