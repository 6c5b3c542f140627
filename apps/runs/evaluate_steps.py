"""The evaluation run's two stages, driven by apps/runs/steps.py: build the candidate (build queue, CPU), then verify
and time it against the problem (gpu queue). Each `work_*` runs outside any transaction and returns plain data; its
`apply_*` commits that to the run under the step's claim."""
from __future__ import annotations

import dataclasses
from typing import Any

from agent.engine import ProblemError
from agent.engine import BuildInfo, Stage, Status, Verdict
from apps.runs import engine
from apps.runs.events import append_event, phase_watcher
from apps.runs.models import Candidate, Run
from apps.runs.verdicts import fail, finish_with_verdict


def work_build(run: Run, candidate: Candidate) -> dict[str, Any]:
    info, header = engine.evaluator().build(candidate.source, engine.eval_config(run.config, run.budgets))
    return {"ok": bool(header.get("ok")), "error": header.get("error", ""), "import_error": header.get("import_error"),
            "build": dataclasses.asdict(info)}


def apply_build(run: Run, candidate: Candidate, result: dict[str, Any]) -> None:
    build = result["build"]
    candidate.build = build
    candidate.backend = build["backend"]
    append_event(run.pk, "build", {"ok": result["ok"], "backend": build["backend"], "seconds": round(build["seconds"], 3),
                                   "cache_hits": build["cache_hits"], "cache_misses": build["cache_misses"],
                                   "fast_path": build["fast_path"], "log": build["log"], "error": result["error"]})
    if result["ok"]:
        candidate.save(update_fields=["build", "backend"])
        run.stage = Run.Stage.EVALUATE
        return
    verdict = Verdict(Status.BUILD_ERROR, Stage.BUILD, result["error"] or "the build failed",
                      build=BuildInfo(**build), device=run.config.get("device", "cpu"))
    candidate.verdict = verdict.to_dict()
    candidate.save(update_fields=["build", "backend", "verdict"])
    finish_with_verdict(run, candidate)


def work_evaluate(run: Run, candidate: Candidate) -> dict[str, Any]:
    problem = run.problem
    try:
        verdict = engine.evaluator().evaluate(problem.source, candidate.source, engine.eval_config(run.config, run.budgets),
                                              names=problem.names, on_phase=phase_watcher(run.pk))
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    return {"verdict": verdict.to_dict()}


def apply_evaluate(run: Run, candidate: Candidate, result: dict[str, Any]) -> None:
    if "problem_error" in result:
        message = (f"Your problem module failed in the sandbox, so nothing could be compared: {result['problem_error']}. "
                   "Fix the problem module (it must import quickly and run get_inputs/Model cleanly) and upload it again.")
        run.problem.runtime_error = result["problem_error"]
        run.problem.save(update_fields=["runtime_error"])
        fail(run, message)
        return
    candidate.verdict = result["verdict"]
    candidate.save(update_fields=["verdict"])
    finish_with_verdict(run, candidate)
