"""What a user is told when a problem is too big (apps/problems/footprint.py, the engine's upload check): a footprint
traced on meta tensors that cannot fit is refused at once with its size and the limit; where the footprint cannot be
traced, the real run's out-of-memory is still told as too big, never as a traceback."""
import time

import pytest

from agent.engine import ProblemNames
from agent.engine.evaluate import EvalConfig, Evaluator, ProblemError, ProblemTooBig
from agent.engine.sandbox import Limits
from agent.engine.memory_text import ran_out_of_memory
from apps.problems.footprint import input_bytes, too_big, too_big_traced

GIB = 1 << 30
# A 700 MiB matrix and a vector (KernelBench's level1/4_Matrix_vector_multiplication_, smaller): the inputs fit a
# 2 GiB process, not with the copy handed to the check and the interpreter.
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
# The same, with a forward that reads a value: a meta tensor has none, so no footprint can be traced.
UNTRACEABLE = MATRIX_VECTOR.replace("        return torch.matmul(A, B)",
                                    "        if B.sum().item() < 0:\n            B = -B\n        return torch.matmul(A, B)")


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory):
    cfg = EvalConfig(device="cpu", reference_limits=Limits(wall_seconds=120, cpu_seconds=600, memory_bytes=2 * GIB))
    with Evaluator(cfg, cache_root=tmp_path_factory.mktemp("kstudio-cache")) as ev:
        yield ev


def test_a_traced_footprint_too_big_for_the_check_is_refused_before_anything_runs(evaluator):
    started = time.monotonic()
    with pytest.raises(ProblemTooBig) as info:
        evaluator.check_problem(MATRIX_VECTOR)
    big = info.value
    assert big.limit == 2 * GIB and big.needed > big.limit and big.footprint.startswith("inputs 702.7 MiB")
    assert "traced on meta tensors" in str(big) and "at most 2.0 GiB" in str(big)
    message = too_big_traced(big.footprint, big.needed, big.limit)
    assert message.startswith("The problem is too big for this studio: its footprint is inputs 702.7 MiB")
    assert "Traceback" not in message
    print(f"refused in {time.monotonic() - started:.1f} s")


def test_where_no_footprint_can_be_traced_the_real_runs_out_of_memory_is_told_as_too_big(tmp_path):
    # 1 GiB for the check's own allocations (the limit is on top of what torch maps in the job: limits.apply_rlimits):
    # the inputs and the copy handed between the processes take 1.4 GiB.
    cfg = EvalConfig(device="cpu", reference_limits=Limits(wall_seconds=120, cpu_seconds=600, memory_bytes=GIB))
    with Evaluator(cfg, cache_root=tmp_path) as small, pytest.raises(ProblemError) as info:
        small.check_problem(UNTRACEABLE)
    error = str(info.value)
    assert not isinstance(info.value, ProblemTooBig) and ran_out_of_memory(error), error[-400:]
    footprint = input_bytes(UNTRACEABLE, ProblemNames())
    assert footprint == 256 * 1024 * 700 * 4 + 1024 * 700 * 4
    assert too_big(footprint, 2 * GIB).startswith("The problem is too big for this studio: its inputs take 702.7 MiB, "
                                                  "and running it ran out of memory")


def test_inputs_over_the_limit_are_named_as_such():
    assert too_big(6 * GIB, 2 * GIB).startswith("The problem is too big for this studio: its inputs alone take 6.0 GiB")
    assert "it ran out of memory" in too_big(None, 2 * GIB)
