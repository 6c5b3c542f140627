"""Rewards from the evaluation engine (DESIGN §5, §8): a candidate the policy wrote is built, checked and timed
in the sandbox by agent.engine.evaluate, exactly as the agent's write_candidate tool does, and its verdict becomes the
agent's correctness-gated reward (agent.loop.runner.reward, as CUDA Agent): -1 when not accepted (or when the answer
holds no candidate at all), 1 when accepted, 2 when it also beats eager by the margin, 3 when it beats eager
and torch.compile by the margin.

EngineReward is a TRL reward function (GRPOTrainer's reward_funcs) for stage (a); stage (d)'s environment
runs the agent's tools over the same Engine.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from agent.engine import EvalConfig, Evaluator, ProblemError
from agent.loop import reward as milestone_reward
from agent.engine import Limits
from agent.loop import Toolbox, verdict_summary
from agent.engine import Verdict
from trainer.config import RewardConfig

log = logging.getLogger(__name__)

NO_CANDIDATE = -1.0
"""An answer with no candidate module in it earns what a rejected candidate earns."""

_CODE_BLOCK = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_candidate(text: str) -> str | None:
    """The candidate module in an answer: the last code block that defines ModelNew, else the whole answer
    when it defines ModelNew outside a block; None when there is none."""
    blocks = [b for b in _CODE_BLOCK.findall(text) if "class ModelNew" in b]
    if blocks:
        return blocks[-1]
    return text if "class ModelNew" in text else None


def eval_config(config: RewardConfig, device: str) -> EvalConfig:
    return EvalConfig(device=device, trials=config.trials, min_rounds=config.min_rounds,
                      max_rounds=max(config.min_rounds, 15),
                      compile_baseline=config.compile_baseline, build_seconds=config.build_seconds,
                      limits=Limits(wall_seconds=config.candidate_seconds))


def verdict_reward(verdict: Verdict) -> float:
    """The agent's milestone reward of one verdict."""
    return milestone_reward(verdict_summary(verdict))


class Engine:
    """The evaluation engine as the trainer uses it: one warm Evaluator (one sandbox) per device, started on
    first use, and the agent's Toolbox over it. `evaluators` lends ones started elsewhere (their owner closes
    them)."""

    def __init__(self, config: RewardConfig, evaluators: dict[str, Evaluator] | None = None) -> None:
        self.config = config
        self._lent = dict(evaluators or {})
        self._own: dict[str, Evaluator] = {}

    def evaluator(self, device: str) -> Evaluator:
        if device in self._lent:
            return self._lent[device]
        if device not in self._own:
            self._own[device] = Evaluator(eval_config(self.config, device), cache_root=self.config.cache_dir)
        return self._own[device]

    def toolbox(self, device: str) -> Toolbox:
        return Toolbox(self.evaluator(device), eval_config(self.config, device))

    def evaluate(self, problem_source: str, candidate_source: str, device: str) -> Verdict:
        return self.evaluator(device).evaluate(problem_source, candidate_source, eval_config(self.config, device))

    def close(self) -> None:
        for evaluator in self._own.values():
            evaluator.close()
        self._own.clear()


class EngineReward:
    """Scores GRPO completions by evaluating the candidate in each against the row's problem (columns
    `problem_source` and `device`) with the engine. The sandbox starts on the first candidate (an answer without
    one costs nothing); identical candidates for one problem in a batch are judged once."""

    __name__ = "engine"  # TRL names the reward's log column after it

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def score(self, problem_source: str, device: str, answer: str) -> tuple[float | None, str]:
        """(reward, status) of one answer; reward None when the problem itself fails (not the policy's doing)."""
        candidate = extract_candidate(answer)
        if candidate is None:
            return NO_CANDIDATE, "no_candidate"
        try:
            verdict = self.engine.evaluate(problem_source, candidate, device)
        except ProblemError as exc:
            log.warning("a problem failed in the engine, its completions are not scored: %s", exc)
            return None, "problem_error"
        return verdict_reward(verdict), verdict.status.value

    def __call__(self, prompts: list[Any], completions: list[Any], problem_source: list[str], device: list[str],
                 log_metric: Callable[[str, float], None] | None = None, **_: Any) -> list[float | None]:
        judged: dict[tuple[str, str, str], tuple[float | None, str]] = {}
        rewards: list[float | None] = []
        statuses: list[str] = []
        for completion, source, dev in zip(completions, problem_source, device, strict=True):
            answer = completion if isinstance(completion, str) else completion[-1]["content"] or ""
            key = (source, dev, extract_candidate(answer) or "")
            if key not in judged or not key[2]:
                judged[key] = self.score(source, dev, answer)
            reward, status = judged[key]
            rewards.append(reward)
            statuses.append(status)
        if log_metric is not None:
            for status in ("no_candidate", "accepted"):
                log_metric(f"engine/{status}", statuses.count(status) / len(statuses))
        return rewards
