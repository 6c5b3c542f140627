"""Would torch.compile's own output pass the engine's check? Each KernelBench problem at its own size: eager's output,
torch.compile's and a float64 evaluation of the same model on the same inputs, judged with the engine's comparison
(compare.held_to_eager: the dtype's tolerance of eager's output, or, where eager itself is out of tolerance of float64,
as accurate as eager). A baseline that fails it is faster by precision the engine does not let a candidate spend (on
the H200, cuDNN runs float32 convolutions on TF32 tensor cores where PyTorch allows it, its default, and inductor's
channels-last layouts pick such kernels where eager's NCHW ones are plain float32). Never evidence in a verdict.

Usage on the GPU box: PYTHONPATH=$PWD python3 benchmarks/probes/compile_precision_probe.py PROBLEM.py [more ...]
Prints one JSON line per problem.
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import torch

from agent.engine.evaluate.batch import as_list
from agent.engine.evaluate.compare import compare_outputs, held_to_eager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kb_problem import load_problem  # noqa: E402 - the problem files as every probe here builds them


def _judge(refs: list[torch.Tensor], outs: list[torch.Tensor], exacts: list[torch.Tensor]) -> dict:
    strict = compare_outputs(refs, outs, None, None)
    held, ill = held_to_eager(refs, outs, exacts, None, None)
    return {"passes": held.passed, "strict": strict.passed, "eager_ill_conditioned": ill,
            "mismatched": strict.mismatched, "max_rel": strict.max_rel_error, "note": held.note[:300]}


def probe(path: Path) -> dict:
    _, model, inputs = load_problem(path, "precision_problem")
    row: dict = {"problem": path.stem, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
                 "tf32_matmul": torch.backends.cuda.matmul.allow_tf32}
    with torch.no_grad():
        refs = [o.clone() for o in as_list(model(*inputs))]
        wide = copy.deepcopy(model).double()
        exacts = as_list(wide(*[x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                                for x in inputs]))
        del wide
        compiled = torch.compile(model)
        outs = [o.clone() for o in as_list(compiled(*inputs))]
    row["compile"] = _judge(refs, outs, exacts)
    return row


def main(paths: list[str]) -> None:
    for name in paths:
        try:
            row = probe(Path(name))
        except Exception as exc:  # noqa: BLE001 - one problem's failure is a line of its own, the rest go on
            row = {"problem": Path(name).stem, "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(json.dumps(row), flush=True)
        torch.cuda.empty_cache()
        torch._dynamo.reset()


if __name__ == "__main__":
    main(sys.argv[1:])
