"""What a verdict does to a run: the verification and timing events of an evaluated candidate, the run's best moving
on, the library offered the best kernel, and the run ending (finished with a verdict, failed without one, or an agent
run over with its trajectory and what it taught the knowledge base)."""
from __future__ import annotations

from typing import Any

from django.utils import timezone

from agent.loop import state as agent_state
from agent.loop import AgentState
from agent.loop import to_record
from apps.kernels.services import add_remeasurement, offer
from apps.knowledge.services import record_run
from apps.runs.events import append_event
from apps.runs.models import Candidate, Run
from apps.runs.stored_verdict import StoredVerdict
from studio.storable import storable_text


def emit_verdict(run: Run, candidate: Candidate, extra: dict[str, Any] | None = None) -> None:
    """The verification and timing events of an evaluated candidate; the run's best moves on when it
    is accepted and faster. `extra` is merged into each payload (an agent run adds its turn)."""
    v = StoredVerdict(candidate.verdict)
    extra = extra or {}
    append_event(run.pk, "verification", {"turn": candidate.turn, **v.part(
        "status", "stage", "correct", "message", "trials", "flags", "weights", "stdout", "stderr"), **extra})
    if v.timing:
        t = v.timing
        append_event(run.pk, "timing", {"turn": candidate.turn, **{k: t[k] for k in (
            "candidate_ms", "eager_ms", "compile_ms", "speedup_vs_eager", "speedup_vs_compile", "clock", "compile_note")},
            "speedup_vs_best": t.get("speedup_vs_best"), "sol_fraction": t.get("sol_fraction"),
            "spread": {k: t[k] for k in ("candidate", "eager", "compile")}, **extra})
    if v.accepted:
        speedup = v.speedup_vs_eager
        if run.best_speedup is None or (speedup or 0) > run.best_speedup:
            run.best_candidate, run.best_speedup = candidate, speedup
            append_event(run.pk, "best", {"turn": candidate.turn, "speedup_vs_eager": speedup,
                                          "speedup_vs_best": (v.timing or {}).get("speedup_vs_best"), **extra})


def save_kernel(run: Run, candidate: Candidate) -> bool:
    """Offer the run's best candidate to the library; the event says what became of it and why. True when the
    library holds it (now or already)."""
    offered = offer(candidate)
    if offered.kernel is None:
        append_event(run.pk, "kernel_not_kept", {"turn": candidate.turn, "reason": offered.reason})
        return False
    kernel = offered.kernel
    append_event(run.pk, "kernel_saved", {"kernel": kernel.pk, "url": kernel.get_absolute_url(), "name": kernel.name,
                                          "duplicate": offered.duplicate, "reason": offered.reason})
    return True


def finish_with_verdict(run: Run, candidate: Candidate) -> None:
    """An evaluation run is over: its one candidate's verdict says how."""
    v = StoredVerdict(candidate.verdict)
    emit_verdict(run, candidate)
    if run.config.get("rebenchmark_of") is not None:
        kernel, said = add_remeasurement(int(run.config["rebenchmark_of"]), candidate)
        append_event(run.pk, "remeasured", {"kernel": kernel.pk if kernel else None, "message": said,
                                            "url": kernel.get_absolute_url() if kernel else ""})
    profiled = run.config.get("profile_of")
    if profiled:
        # A profile of a candidate that lives in its own run: the library already has it or decided against it there.
        message = (f"Profiled candidate {profiled['turn']} of run #{profiled['run']} ({v.status}): "
                   + ("the profile table and the roofline are below." if v.accepted else v.message[:500]))
    elif v.accepted:
        speedup = v.speedup_vs_eager
        kept = save_kernel(run, candidate)
        message = f"Accepted: {speedup:.2f}x over eager PyTorch" if speedup else "Accepted"
        message += "; kept in the library." if kept else "; not kept in the library (see the run's events for why)."
    else:
        message = f"Not accepted ({v.status} at {v.stage}): {v.message[:500]}"
    run.status, run.stage, run.message, run.finished_at = Run.Status.FINISHED, Run.Stage.DONE, message, timezone.now()
    append_event(run.pk, "run_finished", {"status": run.status, "message": message, "accepted": v.accepted,
                                          "best_speedup": run.best_speedup})


def fail(run: Run, message: str) -> None:
    """The run cannot finish (its problem is broken, or a step failed for good): over without a verdict."""
    run.status, run.stage, run.message, run.finished_at = Run.Status.FAILED, Run.Stage.DONE, message, timezone.now()
    append_event(run.pk, "run_finished", {"status": run.status, "message": message})


def finish_agent_run(run: Run, state: AgentState) -> None:
    """The agent run is over (submitted, out of budget, failed or cancelled): keep the best kernel with its
    provenance, store the training record, distill what was learnt into the knowledge base."""
    run.agent_state = state.to_dict()
    # Kept only when worth it (agent.knowledge.library), even when the user cancelled the run; the training record says so,
    # so the training data's "accepted only" takes nothing the library refused.
    kept = run.best_candidate is not None and save_kernel(run, run.best_candidate)
    run.trajectory = {**to_record(state), "kept": kept}
    entries = record_run(run, state)
    append_event(run.pk, "knowledge_recorded", {"entries": len(entries), "titles": [e.title for e in entries]})
    best = f"best {run.best_speedup:.2f}x over eager PyTorch" if run.best_speedup else (
        "a verified kernel" if run.best_candidate else "no verified kernel")
    message = storable_text(f"{state.status.capitalize()}: {state.stop_reason}; {best} after {state.turn} turns.")
    if state.status == agent_state.CANCELLED:
        run.status = Run.Status.CANCELLED
    elif state.status == agent_state.FAILED:
        run.status = Run.Status.FAILED
    else:
        run.status = Run.Status.FINISHED
    run.stage, run.message, run.finished_at = Run.Stage.DONE, message, timezone.now()
    append_event(run.pk, "run_finished", {"status": run.status, "message": message, "agent_status": state.status,
                                          "accepted": run.best_candidate is not None, "best_speedup": run.best_speedup,
                                          "turns": state.turn, "tokens": state.tokens})
