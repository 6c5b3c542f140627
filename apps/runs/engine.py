"""The worker's evaluation engine: one warm Evaluator per worker process, and the studio's settings as an EvalConfig.
A leaf: it imports nothing of the studio's apps, so the run steps and the problems' upload check both use it.

The engine imports torch; it is imported when a worker first evaluates, never by a web process that only queues
work (hence the imports inside the functions)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from agent.engine import EvalConfig, Evaluator

_evaluator: Evaluator | None = None
_evaluator_lock = threading.Lock()


def evaluator() -> Evaluator:
    """One warm Evaluator per worker process: its sandbox zygote has imported torch once."""
    global _evaluator
    with _evaluator_lock:
        if _evaluator is None:
            from agent.engine import Evaluator

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
    """A run's evaluation settings (its `config` and `budgets`), the studio's settings where it names none."""
    from agent.engine import EvalConfig
    from agent.engine import Limits

    return EvalConfig(
        device=config.get("device", settings.KSTUDIO_DEVICE), backend=config.get("backend"),
        compile_baseline=config.get("compile_baseline", settings.KSTUDIO_COMPILE_BASELINE),
        profile=bool(config.get("profile", False)),
        min_rounds=int(config.get("min_rounds", settings.KSTUDIO_EVAL_MIN_ROUNDS)),
        max_rounds=max(int(config.get("min_rounds", settings.KSTUDIO_EVAL_MIN_ROUNDS)),
                       int(config.get("max_rounds", settings.KSTUDIO_EVAL_MAX_ROUNDS))),
        build_seconds=float(settings.KSTUDIO_BUILD_SECONDS),
        device_memory_bytes=(settings.KSTUDIO_EVAL_DEVICE_MEMORY_MB << 20) or None,
        allow_any_torch_op=settings.KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP,
        limits=Limits(wall_seconds=float(budgets.get("wall_seconds", settings.KSTUDIO_CANDIDATE_WALL_SECONDS))),
        reference_limits=Limits(wall_seconds=float(settings.KSTUDIO_REFERENCE_WALL_SECONDS),
                                cpu_seconds=int(settings.KSTUDIO_REFERENCE_WALL_SECONDS * 4)))
