"""A few corpus evaluations, verdict by verdict: `python benchmarks/probes/trust_smoke.py --device cuda
legit_cuda_silu_bias:elementwise_silu_bias_gpu exploit_cuda_side_stream:elementwise_silu_bias_gpu`."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent.engine.evaluate import EvalConfig, Evaluator  # noqa: E402

CORPUS = ROOT / "tests" / "corpus"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("pairs", nargs="+", help="candidate:problem (file stems under tests/corpus)")
    args = parser.parse_args()
    with Evaluator(EvalConfig(device=args.device, compile_baseline=args.compile)) as ev:
        for pair in args.pairs:
            cand, prob = pair.split(":")
            started = time.monotonic()
            v = ev.evaluate((CORPUS / "problems" / f"{prob}.py").read_text(), (CORPUS / "candidates" / f"{cand}.py").read_text())
            print(f"{cand}: {v.status.value} {v.flag_names()} {time.monotonic() - started:.1f}s :: {v.message[:400]}", flush=True)
            t = v.timing
            if t:
                print(f"    cand {t.candidate_ms:.4f} ms events {t.device_events_ms} eager {t.eager_ms:.4f} compile {t.compile_ms} "
                      f"x{t.speedup_vs_eager:.3f} {t.interval_vs_eager} best {t.speedup_vs_best} rounds {t.rounds} "
                      f"calls {t.calls_per_batch} verified {t.verified_calls} compile_note {t.compile_note!r} harness {t.harness!r}",
                      flush=True)
            print("    seconds", {k: round(s, 2) for k, s in v.seconds.items()}, flush=True)


if __name__ == "__main__":
    main()
