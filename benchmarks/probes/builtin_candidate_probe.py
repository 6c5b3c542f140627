"""The built-in policy's first candidate for a problem, checked against the problem's own Model on this machine's
device, outside the engine: a quick look at a new template's numerics and speed on the GPU box, where a full
`agent optimize` run (three variants, each a whole evaluation) costs minutes. Never evidence in a verdict.

Usage on the GPU box: python3 benchmarks/probes/builtin_candidate_probe.py [--no-compile] PROBLEM.py [more problems...]
(an input scale-down is not offered: the problem's own get_inputs() sizes are used). Times eager, the candidate and
torch.compile (unless --no-compile) back to back, 10 calls each after one warm call, with CUDA events.
"""
from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent.builtin import policy, trace  # noqa: E402
from agent.engine.evaluate.loader import exec_module  # noqa: E402


def _ms(fn, args, repeats: int = 10) -> float:
    fn(*args)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        fn(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repeats


def probe(path: Path, out_dir: Path) -> dict:
    buf = io.BytesIO()
    trace.trace({"problem_source": path.read_text()}, buf, {})
    plan = policy.make_plan(json.loads(buf.getvalue()), "cuda")
    variant = policy.variants(plan, "cuda")[0]
    source = out_dir / f"{path.stem}_candidate.py"
    source.write_text(policy.candidate_source(plan, variant, "cuda"))
    t0 = time.monotonic()
    candidate = exec_module(source.read_text(), f"cand_{path.stem}", source.name)
    built = time.monotonic() - t0
    problem = exec_module(path.read_text(), f"prob_{path.stem}", path.name)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).cuda().eval()
    new = candidate.ModelNew(*problem.get_init_inputs()).cuda().eval()
    new.load_state_dict(model.state_dict())
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
    with torch.no_grad():
        want, got = model(*inputs), new(*inputs)
        error = float((want.float() - got.float()).abs().max())
        scale = float(want.float().abs().max())
        row = {"problem": path.stem, "variant": variant.label, "build_s": round(built, 1), "max_abs_error": error,
               "max_abs_reference": scale, "allclose_1e-4": bool(torch.allclose(got.float(), want.float(), rtol=1e-4,
                                                                                  atol=1e-4 * scale)),
               "eager_ms": _ms(model, inputs), "candidate_ms": _ms(new, inputs)}
        if COMPILE:  # the engine's other baseline, the one the built-in policy most often loses to
            compiled = torch.compile(model)
            compiled(*inputs)
            row["compile_ms"] = _ms(compiled, inputs)
            row["vs_compile"] = round(row["compile_ms"] / row["candidate_ms"], 3)
        row["vs_eager"] = round(row["eager_ms"] / row["candidate_ms"], 3)
    return row


COMPILE = "--no-compile" not in sys.argv


def main() -> None:
    out_dir = Path("/tmp/builtin_probe")
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in [a for a in sys.argv[1:] if not a.startswith("--")]:
        try:
            print(json.dumps(probe(Path(name), out_dir)), flush=True)
        except Exception as exc:  # noqa: BLE001 - one problem's failure is reported, the next one still runs
            print(json.dumps({"problem": Path(name).stem, "error": f"{type(exc).__name__}: {exc}"[:2000]}), flush=True)


if __name__ == "__main__":
    main()
