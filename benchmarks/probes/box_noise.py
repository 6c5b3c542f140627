"""How noisy is this machine at the timing's own scale? Times 40 batches of softmax (30 calls, 1M floats) and of a
pure-Python loop (60 calls) in one single-threaded process and prints their median, range and p10-p90 spread, and
the p10-p90 range of the ratio of consecutive batches (what one round of the engine compares). No studio code: run
it with any Python that has torch. Used in docs/benchmarks.md §15 (session 15): on the 2-core dev box the loop's
batches spread 41%, softmax's 20%."""
import statistics
import time
from typing import Callable

import torch


def batch(fn: Callable[[], object], calls: int) -> float:
    """Milliseconds per call over one batch."""
    began = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - began) * 1000 / calls


def main() -> None:
    torch.set_num_threads(1)
    x = torch.randn(1024, 1024)
    for name, fn, calls in (("softmax", lambda: torch.softmax(x, 1), 30), ("spin", lambda: sum(range(20000)), 60)):
        times = [batch(fn, calls) for _ in range(40)]
        ordered, median = sorted(times), statistics.median(times)
        print(f"{name} median {median:.3f} ms, min {ordered[0]:.3f}, max {ordered[-1]:.3f}, "
              f"rel spread p10-p90 {(ordered[36] - ordered[4]) / median:.2%}")
        ratios = sorted(times[i] / times[i + 1] for i in range(0, 40, 2))
        print(f"   consecutive ratio p10-p90 {ratios[2]:.3f}-{ratios[17]:.3f}")


if __name__ == "__main__":
    main()
