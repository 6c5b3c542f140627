"""Evaluating candidate kernels: build, verify against the reference, time against eager and torch.compile."""
from agent.evaluate.config import EvalConfig
from agent.evaluate.evaluator import Evaluator, ProblemError, ProblemNames, evaluate

__all__ = ["EvalConfig", "Evaluator", "ProblemError", "ProblemNames", "evaluate"]
