"""What an evaluation is doing now, for whoever watches it: the run page, the command line. The trusted parent
reports each phase as it starts (planning, building, the reference's and the candidate's set-up, each checked trial,
torch.compile, warm-up, each timing round, the other input sets, profiling).

Progress is never evidence: nothing in a verdict comes from it, and a watcher that fails (a dropped database
connection, a closed pipe) is logged and ignored, never raised into the evaluation.

    def on_phase(phase: str, what: str, elapsed: float) -> None: ...   # elapsed: seconds since the evaluation began
    evaluator.evaluate(problem, candidate, config, on_phase=on_phase)
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# A watcher: (phase, what is happening in words, seconds since the evaluation began).
Watcher = Callable[[str, str, float], None]

# The phases in the order an evaluation passes through them (some are skipped: a cached build, cached peaks, no
# torch.compile, no variants, no profile).
PHASES = ("plan", "build", "peaks", "reference", "candidate", "check", "compile", "warm_up", "timing", "variants", "profile")


class Progress:
    """Reports phases to a watcher (or to nobody), with the seconds since it was made."""

    def __init__(self, watcher: Watcher | None = None) -> None:
        self.watcher = watcher
        self.started = time.monotonic()

    def __call__(self, phase: str, what: str) -> None:
        if self.watcher is None:
            return
        try:
            self.watcher(phase, what, round(time.monotonic() - self.started, 3))
        except Exception:  # noqa: BLE001 - a watcher's failure must never change an evaluation
            log.warning("a progress watcher failed on phase %s; the evaluation goes on", phase, exc_info=True)


SILENT = Progress()
