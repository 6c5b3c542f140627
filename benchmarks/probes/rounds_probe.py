"""Per-round figures of one CPU evaluation (agent/engine/evaluate/session.py): `python benchmarks/probes/rounds_probe.py
CANDIDATE` evaluates tests/corpus/candidates/CANDIDATE.py against the silu problem and prints each round's
per-call times. Used to look for a bias between the candidate's job and the reference's (docs/benchmarks.md §14)."""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.evaluate import session as S
orig = S.Session._round
def spy(self, models, m, probes, flip):
    orig(self, models, m, probes, flip)
    print("round", m.rounds, "cand", round(m.candidate[-1], 3), "eager", round(m.eager[-1], 3), "calls", m.calls, flush=True)
S.Session._round = spy
C = Path(__file__).resolve().parents[2] / "tests" / "corpus"
with Evaluator(EvalConfig(device="cpu", compile_baseline=False, min_rounds=3, max_rounds=3)) as ev:
    v = ev.evaluate((C/"problems/elementwise_silu_bias.py").read_text(), (C/"candidates"/(sys.argv[1]+".py")).read_text())
    print(v.status, v.message[:200])
