"""What a Triton candidate's first call costs in a fresh process whose Triton cache is warm (the candidate's
job pays it inside its first checked call): the call's wall time, then the same again, and cProfile's top entries.

Usage on the GPU box: python3 benchmarks/probes/triton_first_call.py tests/corpus/candidates/legit_triton_silu_bias.py
(run it twice: the first run fills the cache)."""
from __future__ import annotations

import cProfile
import importlib.util
import io
import pstats
import sys
import time

import torch


def main() -> None:
    spec = importlib.util.spec_from_file_location("cand", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    model = module.ModelNew(8192).cuda()
    x = torch.randn(8192, 8192, device="cuda")
    torch.cuda.synchronize()
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    model(x)
    torch.cuda.synchronize()
    profile.disable()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    model(x)
    torch.cuda.synchronize()
    print(f"first call {first * 1000:.1f} ms, second {1000 * (time.perf_counter() - t0):.2f} ms")
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(18)
    print("\n".join(line[:160] for line in text.getvalue().splitlines()[:45]))


if __name__ == "__main__":
    main()
