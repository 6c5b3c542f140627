"""Celery tasks: the upload's sandboxed check of a problem module, on the `build` queue (CPU workers).
The web process never imports the engine; it waits here for the worker's answer (see services.py)."""
from __future__ import annotations

import logging
from typing import Any

from celery import shared_task

from agent.engine import ProblemNames
from apps.runs import engine

log = logging.getLogger(__name__)


@shared_task(ignore_result=False, acks_late=False)
def check_problem(source: str, names: list[str], seconds: float) -> dict[str, Any]:
    """Import and run the problem once in this worker's sandbox: {"ok": True, "header": ...} with what the
    run learnt, or {"ok": False, "error": ...} saying why the problem is refused. Never raises for a bad problem."""
    # The engine imports torch: only a worker that runs this task loads it, never the web process that queues it.
    from agent.engine import ProblemError, ProblemTooBig

    try:
        header = engine.evaluator().check_problem(source, ProblemNames(*names), seconds=seconds)
    except ProblemTooBig as exc:
        return {"ok": False, "error": str(exc),
                "too_big": {"footprint": exc.footprint, "needed": exc.needed, "limit": exc.limit}}
    except ProblemError as exc:
        return {"ok": False, "error": str(exc)}
    except Exception as exc:  # our bug or a broken sandbox: say so rather than blame the module
        log.exception("checking a problem failed")
        return {"ok": False, "internal": True, "error": f"{type(exc).__name__}: {exc}"}
    return {"ok": True, "header": header}
