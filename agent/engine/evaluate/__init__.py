"""Evaluating candidate kernels: build, verify against the reference, time against eager and torch.compile."""
from agent.engine.evaluate.config import EvalConfig
from agent.engine.evaluate.evaluator import Evaluator, ProblemError, ProblemNames, ProblemTooBig, evaluate

__all__ = ["EvalConfig", "Evaluator", "ProblemError", "ProblemNames", "ProblemTooBig", "evaluate"]
