"""The run state machine. Each step: claim the run's current stage (in a transaction), do the work
outside any transaction, then commit the result only if the claim still holds and the run is still
going. Everything a step needs is read from the database, so a redelivered task simply repeats or
skips its step; a claim whose worker vanished is taken over after KSTUDIO_STEP_LEASE_SECONDS.

Untrusted code is never imported here: the Evaluator builds and runs it in its sandbox."""
from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.utils import timezone

from apps.runs.models import Candidate, Run
from apps.runs.services import append_event
from studio.storable import storable_text

if TYPE_CHECKING:
    from agent.evaluate import EvalConfig, Evaluator

log = logging.getLogger(__name__)

# Which queue runs each stage (DESIGN §6): compiling on CPU workers, evaluating on GPU workers.
QUEUES = {Run.Stage.BUILD: "build", Run.Stage.EVALUATE: "gpu", Run.Stage.THINK: "agent", Run.Stage.ACT: "gpu"}


@dataclass
class Outcome:
    """What a step decided: run it later (another worker holds a fresh claim), or nothing more to do."""

    retry_in: float | None = None


def enqueue(run_id: int, stage: str) -> None:
    from apps.runs.tasks import run_step

    run_step.apply_async((run_id, stage), queue=QUEUES[Run.Stage(stage)])


def schedule(run_id: int, stage: str) -> None:
    """Enqueue the step once the current transaction commits (a task must find what it was sent for)."""
    transaction.on_commit(lambda: enqueue(run_id, stage))


def execute(run_id: int, stage: str) -> Outcome:
    token = uuid.uuid4().hex
    claimed = _claim(run_id, stage, token)
    if isinstance(claimed, Outcome):
        return claimed
    run, candidate = claimed
    try:
        result = _WORK[stage](run, candidate)
    except Exception as exc:  # our bug or a broken sandbox: fail the run visibly instead of leaving it claimed
        log.exception("step %s of run %s failed", stage, run_id)
        message = storable_text(f"The {stage} step failed inside the studio ({type(exc).__name__}: {exc}); try again, "
                                "and tell an admin if it keeps happening.")
        _commit(run_id, token, lambda r, c: fail(r, message))
        raise
    _commit(run_id, token, lambda r, c: _APPLY[stage](r, c, result))
    return Outcome()


def _claim(run_id: int, stage: str, token: str) -> Outcome | tuple[Run, Candidate]:
    lease = timedelta(seconds=settings.KSTUDIO_STEP_LEASE_SECONDS)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal or run.stage != stage:
            return Outcome()  # done already (a duplicate or a redelivery of a finished step)
        now = timezone.now()
        if run.step_token and run.step_claimed_at and run.step_claimed_at + lease > now:
            return Outcome(retry_in=max(1.0, (run.step_claimed_at + lease - now).total_seconds()))
        taken_over = bool(run.step_token)
        run.step_token, run.step_claimed_at, run.step_attempts = token, now, run.step_attempts + 1
        if run.status == Run.Status.QUEUED:
            run.status, run.started_at = Run.Status.RUNNING, now
        run.save(update_fields=["step_token", "step_claimed_at", "step_attempts", "status", "started_at"])
        append_event(run_id, "step_started", {"stage": stage, "attempt": run.step_attempts, "resumed": taken_over})
        candidate = run.candidates.order_by("-turn").first()
    return run, candidate


# A database restart while a step works breaks this worker's connection: its result is committed again
# on a fresh one (about a minute of attempts) rather than lost.
_COMMIT_ATTEMPTS = 8


def _commit(run_id: int, token: str, apply: Any) -> None:
    for attempt in range(_COMMIT_ATTEMPTS):
        try:
            return _commit_once(run_id, token, apply)
        except (OperationalError, InterfaceError) as exc:
            if attempt == _COMMIT_ATTEMPTS - 1:
                raise
            log.warning("run %s: committing the step failed (%s); retrying on a new connection", run_id, exc)
            connection.close()  # the pool drops the broken connection and checks the next one it lends
            time.sleep(min(2 ** attempt, 15))


def _commit_once(run_id: int, token: str, apply: Any) -> None:
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.is_terminal or run.step_token != token:
            log.info("run %s: step result discarded (run %s, claim %s)", run_id, run.status,
                     "held" if run.step_token == token else "lost")
            return
        run.step_token, run.step_claimed_at = "", None
        candidate = run.candidates.order_by("-turn").first()
        apply(run, candidate)
        # last_seq is owned by append_event (updated in place); this copy of the row has a stale one.
        run.save(update_fields=RUN_STATE_FIELDS)
        if not run.is_terminal:
            schedule(run_id, run.stage)


def fail(run: Run, message: str) -> None:
    run.status, run.stage, run.message, run.finished_at = Run.Status.FAILED, Run.Stage.DONE, message, timezone.now()
    append_event(run.pk, "run_finished", {"status": run.status, "message": message})


# ------------------------------------------------------------------------------------------ the work

_evaluator: Evaluator | None = None
_evaluator_lock = threading.Lock()


def evaluator() -> Evaluator:
    """One warm Evaluator per worker process: its sandbox zygote has imported torch once."""
    global _evaluator
    with _evaluator_lock:
        if _evaluator is None:
            from agent.evaluate import Evaluator

            cache = Path(settings.KSTUDIO_CACHE_DIR) if settings.KSTUDIO_CACHE_DIR else None
            _evaluator = Evaluator(eval_config({}, {}), cache_root=cache).__enter__()
        return _evaluator


def close_evaluator() -> None:
    global _evaluator
    with _evaluator_lock:
        if _evaluator is not None:
            _evaluator.close()
            _evaluator = None


def eval_config(config: dict[str, Any], budgets: dict[str, Any]) -> EvalConfig:
    from agent.evaluate import EvalConfig
    from agent.sandbox import Limits

    return EvalConfig(
        device=config.get("device", settings.KSTUDIO_DEVICE), backend=config.get("backend"),
        compile_baseline=config.get("compile_baseline", settings.KSTUDIO_COMPILE_BASELINE),
        iterations=config.get("iterations", settings.KSTUDIO_EVAL_ITERATIONS),
        build_seconds=float(settings.KSTUDIO_BUILD_SECONDS),
        limits=Limits(wall_seconds=float(budgets.get("wall_seconds", settings.KSTUDIO_CANDIDATE_WALL_SECONDS))),
        reference_limits=Limits(wall_seconds=float(settings.KSTUDIO_REFERENCE_WALL_SECONDS),
                                cpu_seconds=int(settings.KSTUDIO_REFERENCE_WALL_SECONDS * 4)))


def _work_build(run: Run, candidate: Candidate) -> dict[str, Any]:
    info, header = evaluator().build(candidate.source, eval_config(run.config, run.budgets))
    return {"ok": bool(header.get("ok")), "error": header.get("error", ""), "import_error": header.get("import_error"),
            "build": dataclasses.asdict(info)}


def _apply_build(run: Run, candidate: Candidate, result: dict[str, Any]) -> None:
    from agent.verdict import BuildInfo, Stage, Status, Verdict

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
    _finish_with_verdict(run, candidate)


def _work_evaluate(run: Run, candidate: Candidate) -> dict[str, Any]:
    from agent.evaluate import ProblemError
    from apps.problems.services import names_of

    problem = run.problem
    try:
        verdict = evaluator().evaluate(problem.source, candidate.source, eval_config(run.config, run.budgets),
                                       names=names_of(problem))
    except ProblemError as exc:
        return {"problem_error": str(exc)}
    return {"verdict": verdict.to_dict()}


def _apply_evaluate(run: Run, candidate: Candidate, result: dict[str, Any]) -> None:
    if "problem_error" in result:
        message = (f"Your problem module failed in the sandbox, so nothing could be compared: {result['problem_error']}. "
                   "Fix the problem module (it must import quickly and run get_inputs/Model cleanly) and upload it again.")
        run.problem.runtime_error = result["problem_error"]
        run.problem.save(update_fields=["runtime_error"])
        fail(run, message)
        return
    candidate.verdict = result["verdict"]
    candidate.save(update_fields=["verdict"])
    _finish_with_verdict(run, candidate)


def emit_verdict(run: Run, candidate: Candidate, extra: dict[str, Any] | None = None) -> None:
    """The verification and timing events of an evaluated candidate; the run's best moves on when it
    is accepted and faster. `extra` is merged into each payload (an agent run adds its turn)."""
    v = candidate.verdict
    extra = extra or {}
    append_event(run.pk, "verification", {
        "turn": candidate.turn, "status": v["status"], "stage": v["stage"], "correct": v["correct"],
        "message": v["message"], "trials": v["trials"], "flags": v["flags"], "weights": v["weights"],
        "stdout": v["stdout"], "stderr": v["stderr"], **extra})
    if v.get("timing"):
        t = v["timing"]
        append_event(run.pk, "timing", {"turn": candidate.turn, **{k: t[k] for k in (
            "candidate_ms", "eager_ms", "compile_ms", "speedup_vs_eager", "speedup_vs_compile", "clock", "compile_note")},
            "spread": {k: t[k] for k in ("candidate", "eager", "compile")}, **extra})
    if v["status"] == "accepted":
        speedup = (v.get("timing") or {}).get("speedup_vs_eager")
        if run.best_speedup is None or (speedup or 0) > run.best_speedup:
            run.best_candidate, run.best_speedup = candidate, speedup
            append_event(run.pk, "best", {"turn": candidate.turn, "speedup_vs_eager": speedup, **extra})


def save_kernel(run: Run, candidate: Candidate) -> None:
    from apps.kernels.services import keep_accepted

    kernel = keep_accepted(candidate)
    append_event(run.pk, "kernel_saved", {"kernel": kernel.pk, "url": kernel.get_absolute_url(), "name": kernel.name})


def _finish_with_verdict(run: Run, candidate: Candidate) -> None:
    v = candidate.verdict
    emit_verdict(run, candidate)
    if v["status"] == "accepted":
        speedup = (v.get("timing") or {}).get("speedup_vs_eager")
        save_kernel(run, candidate)
        message = f"Accepted: {speedup:.2f}x over eager PyTorch." if speedup else "Accepted."
    else:
        message = f"Not accepted ({v['status']} at {v['stage']}): {v['message'][:500]}"
    run.status, run.stage, run.message, run.finished_at = Run.Status.FINISHED, Run.Stage.DONE, message, timezone.now()
    append_event(run.pk, "run_finished", {"status": run.status, "message": message, "accepted": v["status"] == "accepted",
                                          "best_speedup": run.best_speedup})


RUN_STATE_FIELDS = ["status", "stage", "message", "step_token", "step_claimed_at", "best_candidate", "best_speedup",
                     "finished_at", "agent_state", "trajectory"]


def _agent_step(name: str) -> Any:
    # agent_steps imports this module; look its functions up when a step runs.
    def call(*args: Any) -> Any:
        from apps.runs import agent_steps

        return getattr(agent_steps, name)(*args)
    return call


_WORK = {Run.Stage.BUILD: _work_build, Run.Stage.EVALUATE: _work_evaluate,
         Run.Stage.THINK: _agent_step("work_think"), Run.Stage.ACT: _agent_step("work_act")}
_APPLY = {Run.Stage.BUILD: _apply_build, Run.Stage.EVALUATE: _apply_evaluate,
          Run.Stage.THINK: _agent_step("apply_think"), Run.Stage.ACT: _agent_step("apply_act")}
