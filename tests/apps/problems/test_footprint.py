"""What a user is told when a problem is too big (apps/problems/footprint.py): the engine's real failure for a
problem whose inputs fit the limit but not together with the copy the check hands between its processes."""
import pytest

from agent.engine.evaluate import EvalConfig, Evaluator, ProblemError
from agent.engine.sandbox import Limits
from apps.problems.footprint import input_bytes, ran_out_of_memory, too_big
from agent.engine import ProblemNames

GIB = 1 << 30
# A 700 MiB matrix and a vector: the inputs fit a 2 GiB process, the mapping that carries them to the check does not.
MATRIX_VECTOR = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, A, B):
        return torch.matmul(A, B)


M = 256
K = 1024 * 700


def get_inputs():
    A = torch.rand(M, K)
    B = torch.rand(K, 1)
    return [A, B]


def get_init_inputs():
    return []
'''


def test_a_check_that_cannot_map_the_inputs_it_hands_over_is_told_as_too_big_not_as_a_traceback(tmp_path):
    cfg = EvalConfig(device="cpu", reference_limits=Limits(wall_seconds=120, cpu_seconds=600, memory_bytes=2 * GIB))
    with Evaluator(cfg, cache_root=tmp_path) as evaluator, pytest.raises(ProblemError) as info:
        evaluator.check_problem(MATRIX_VECTOR)
    error = str(info.value)
    assert ran_out_of_memory(error), error[-400:]
    footprint = input_bytes(MATRIX_VECTOR, ProblemNames())
    message = too_big(footprint, 2 * GIB)
    assert footprint == 256 * 1024 * 700 * 4 + 1024 * 700 * 4
    assert message.startswith("The problem is too big for this studio: its inputs take 702.7 MiB, and with its "
                              "outputs and the copy") and "at most 2.0 GiB" in message


def test_inputs_over_the_limit_are_named_as_such():
    assert too_big(6 * GIB, 2 * GIB).startswith("The problem is too big for this studio: its inputs alone take 6.0 GiB")
    assert "it ran out of memory" in too_big(None, 2 * GIB)
