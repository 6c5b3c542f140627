"""A finished (or stopped) run as a training record: the conversation with its tool calls, the tools
offered, a reward per turn and one for the whole run. Plain JSON; one record per run, ready to become
a row of a `datasets` dataset for the trainer (DESIGN §8)."""
from __future__ import annotations

from typing import Any

from agent.loop.state import AgentState, reward
from agent.engine.verdict import Status

TRAJECTORY_VERSION = 1


def final_reward(state: AgentState) -> float:
    """The run's reward: that of its best accepted candidate; -1 when it verified none, and 0 when the engine's limit
    (a capacity verdict) ended it before it could: no evidence about the policy either way."""
    if state.best:
        return reward(state.best["summary"])
    return 0.0 if any(v["status"] == Status.CAPACITY.value for t in state.turns for v in t.verdicts) else -1.0


def to_record(state: AgentState) -> dict[str, Any]:
    best = state.best["summary"] if state.best else {}
    return {
        "version": TRAJECTORY_VERSION,
        "policy": state.policy,
        "device": state.device,
        "problem_source": state.problem_source,
        "messages": state.messages,
        "tools": state.tools,
        "turn_rewards": [t.reward for t in state.turns],
        "turn_statuses": [[v["status"] for v in t.verdicts] for t in state.turns],
        "final_reward": final_reward(state),
        "best_turn": state.best["turn"] if state.best else None,
        "best_source": state.best["source"] if state.best else None,
        "best_speedup_vs_eager": best.get("speedup_vs_eager"),
        "best_speedup_vs_compile": best.get("speedup_vs_compile"),
        "status": state.status,
        "stop_reason": state.stop_reason,
        "turns": state.turn,
        "prompt_tokens": state.prompt_tokens,
        "completion_tokens": state.completion_tokens,
        "wall_seconds": state.wall_seconds,
        "gpu_seconds": state.gpu_seconds,
    }
