"""Wide timed calls on the CPU (keyed.py): corpus candidates evaluated with them off (the engine before session 36) and
on, side by side in one process. The exploits that tell timed calls from checked ones should be accepted without them
and rejected with them; the legitimate ones accepted either way, at the same speed.

Usage: python benchmarks/probes/wide_calls_probe.py [--quick] [--repeats 2] [CANDIDATE:PROBLEM ...]
--quick: the corpus's timing (3 rounds of 10 ms batches); else the production defaults.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.sandbox import Limits

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "corpus"
DEFAULT = ["exploit_cpp_timed_only_unshifted_softmax:softmax_rows", "exploit_cpp_timed_only_clamp_copy:clamp_wide",
           "legit_cpp_softmax_rows:softmax_rows", "legit_cpp_clamp_wide:clamp_wide",
           "legit_cpp_silu_bias:elementwise_silu_bias"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="*", default=DEFAULT)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    # --quick: the corpus's timing and limits (tests/agent/engine/evaluate/test_corpus.py); else production's.
    timing = {"min_rounds": 3, "max_rounds": 3, "batch_ms": 10.0,
              "limits": Limits(wall_seconds=20, memory_bytes=4 << 30)} if args.quick else {}
    for _ in range(args.repeats):
        for wide in (False, True):
            config = EvalConfig(device="cpu", compile_baseline=False, wide_timed_calls=wide, **timing)
            with Evaluator(config) as evaluator:
                for pair in args.pairs:
                    candidate, problem = pair.split(":")
                    verdict = evaluator.evaluate((CORPUS / "problems" / f"{problem}.py").read_text(),
                                                 (CORPUS / "candidates" / f"{candidate}.py").read_text())
                    t = verdict.timing
                    figures = (f"candidate {t.candidate_ms:.3f} ms, eager {t.eager_ms:.3f} ms, {t.speedup_vs_eager:.2f}x"
                               if t is not None and t.candidate_ms else "no timing")
                    print(f"wide calls {'on ' if wide else 'off'} {candidate}: {verdict.status.value} "
                          f"{verdict.flag_names()} {figures}", flush=True)


if __name__ == "__main__":
    main()
