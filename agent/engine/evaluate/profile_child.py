"""The program ncu launches: load the candidate, warm it up, and profile exactly one call.

ncu must start the process it profiles, so this runs as a fresh Python inside the sandbox child;
--profile-from-start off plus profiler.start()/stop() keep imports and warm-up out of the report.
"""
from __future__ import annotations

import json
import sys

import torch

from agent.engine.evaluate.jobs import CANDIDATE_MODULE, build_candidate, problem_setup, extension_router
from agent.engine.evaluate.loader import exec_module
from agent.engine.evaluate.plan import TrialPlan


def main(path: str) -> None:
    with open(path) as f:
        payload = json.load(f)
    plan = TrialPlan.from_payload(payload["plan"])
    setup = problem_setup(payload, plan, "cuda")
    extension_router(payload, loadable=True)
    module = exec_module(payload["candidate_source"], CANDIDATE_MODULE, "candidate.py")
    model, _ = build_candidate(module, setup, plan, "cuda")
    args = setup.inputs
    with torch.no_grad():
        for _ in range(3):
            model(*args)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        model(*args)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main(sys.argv[1])
