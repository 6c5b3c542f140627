"""Every exploit in the corpus must be refused and every legitimate candidate accepted, by the real
engine: real builds, real sandboxed children, real timing. GPU cases skip here with a reason."""
import dataclasses
import importlib.util
import os
import re
from pathlib import Path

import pytest
import torch

from agent.engine.evaluate import EvalConfig, Evaluator
from agent.engine.sandbox import Limits, bwrap

CORPUS = Path(__file__).resolve().parents[3] / "corpus"


def _manifest():
    spec = importlib.util.spec_from_file_location("corpus_manifest", CORPUS / "manifest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


CASES = _manifest()
# The real timing protocol (every timed call checked, on the parent's clock), with fewer and shorter rounds
# than production: the verdict's class is the point here, not a tight interval; tighter limits than
# production so that hangs and runaway allocations end quickly (a legitimate CPU case's session takes 1-2 s here, and
# each hang case waits out the whole wall).
LIMITS = Limits(wall_seconds=20, memory_bytes=4 << 30)
QUICK = {"min_rounds": 3, "max_rounds": 3, "batch_ms": 10.0}
CONFIG = {"cpu": EvalConfig(device="cpu", compile_baseline=False, limits=LIMITS, **QUICK),
          "cuda": EvalConfig(device="cuda", compile_baseline=False, limits=Limits(wall_seconds=30), **QUICK)}


@pytest.fixture(scope="module")
def evaluators(tmp_path_factory):
    # A cache prepared ahead (KSTUDIO_CACHE_DIR, e.g. by `python -m agent build` in parallel on the GPU
    # box) is used as is; otherwise every build starts cold in a fresh directory.
    cache = Path(os.environ["KSTUDIO_CACHE_DIR"]) if os.environ.get("KSTUDIO_CACHE_DIR") else tmp_path_factory.mktemp("kstudio-cache")
    made = {}
    yield lambda device: made.setdefault(device, Evaluator(CONFIG[device], cache_root=cache).__enter__())
    for ev in made.values():
        ev.close()


def _id(case):
    return f"{case.device}-{Path(case.candidate).stem}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_the_engine_judges_the_corpus_candidate_as_expected(case, evaluators):
    if case.device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: run on the GPU box (docs/benchmarks.md records the GPU runs)")
    if case.bwrap and bwrap.usable()[0] is None:
        pytest.skip(f"checks the bubblewrap wall, which is not usable here: {bwrap.usable()[1]}")
    problem = (CORPUS / case.problem).read_text()
    candidate = (CORPUS / case.candidate).read_text()
    config = CONFIG[case.device]
    config = dataclasses.replace(config, backend=case.backend)
    verdict = evaluators(case.device).evaluate(problem, candidate, config)
    message = verdict.message if len(verdict.message) < 900 else verdict.message[:300] + " ... " + verdict.message[-600:]
    summary = f"{verdict.status.value}: {message} flags={verdict.flag_names()}"
    seconds = " ".join(f"{k}={v:.2f}" for k, v in verdict.seconds.items())
    print(f"\nVERDICT {_id(case)} expect={case.expect} -> {summary} [{seconds}]")  # visible with -s, as it happens
    if case.expect == "accepted":
        assert verdict.accepted, summary
        assert verdict.correct and verdict.timing is not None and verdict.timing.candidate_ms > 0
    elif case.expect == "not_faster":
        assert verdict.status.value in case.statuses, summary
        if verdict.accepted:
            timing = verdict.timing
            assert timing is not None, summary
            # Its figure does not say it is faster: the median, or where the rounds were too noisy for a headline
            # (noisy_timing: never published as one) the low end of the interval. Under make test's two workers the
            # quick protocol's three 10 ms rounds once put this median at 1.03x (interval 0.47-1.47x) for a candidate
            # that reads 0.24-0.35x alone.
            noisy = "noisy_timing" in verdict.flag_names() and timing.interval_vs_eager is not None
            assert timing.speedup_vs_eager <= case.max_speedup or (noisy and timing.interval_vs_eager[0] <= case.max_speedup), \
                summary
    else:
        assert not verdict.accepted, summary
        if case.statuses:
            assert verdict.status.value in case.statuses, summary
        if case.flags and verdict.status.value != "incorrect":
            assert set(verdict.flag_names()) & set(case.flags), summary
        if case.message:
            assert re.search(case.message, verdict.message), summary
    # What a job reports of its own writes is checked from the host too: nothing may have landed here.
    checkout = CORPUS.parents[1]
    escaped = [p for p in (checkout / "agent" / "kstudio_escape.py", checkout / "var" / "kstudio_escape",
                           checkout / "kstudio_escape") if p.exists()]
    assert not escaped, f"a job wrote into the checkout: {escaped}"
