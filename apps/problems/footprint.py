"""How much memory a problem needs, read off its source (AST only), and what to tell a user whose problem is too
big for the studio's limits: a plain sentence with the footprint and the limit, never the allocator's traceback."""
from __future__ import annotations

import math

from agent.knowledge import problem_signature
from agent.engine import Limits
from agent.engine import ProblemNames
from agent.engine.memory_text import size_text

_DTYPE_BYTES = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}


def memory_limit() -> int:
    """The memory a problem's process may use: the sandbox's reference limit (the studio leaves it at its default)."""
    return Limits().memory_bytes


def input_bytes(source: str, names: ProblemNames) -> int | None:
    """The bytes get_inputs() allocates, when every input's shape can be read statically; None otherwise."""
    signature = problem_signature(source, names)
    if not signature.shapes:
        return None
    total = 0
    for shape, dtype in zip(signature.shapes, signature.dtypes):
        if shape is None or None in shape:
            return None
        total += math.prod(shape) * _DTYPE_BYTES.get(dtype or "float32", 4)  # type: ignore[arg-type]
    return total


def too_big(footprint: int | None, limit: int) -> str:
    """The user's message for a problem that does not fit."""
    if footprint is None:
        have = "it ran out of memory"
    elif footprint > limit:
        have = f"its inputs alone take {size_text(footprint)}"
    else:  # the inputs fit, but not with what running it needs beside them
        have = (f"its inputs take {size_text(footprint)}, and running it ran out of memory (its forward's own "
                "intermediates, its outputs and the copy of the inputs the check hands between processes)")
    return (f"The problem is too big for this studio: {have}, and a problem's process may use at most {size_text(limit)} "
            "of memory (the reference, its inputs and outputs together). Make the sizes in get_inputs() smaller "
            "(KernelBench's full sizes are meant for a GPU) and upload it again; nothing was created.")


def too_big_traced(footprint: str, needed: int, limit: int) -> str:
    """The user's message for a problem whose footprint, traced on meta tensors by the check, does not fit."""
    return (f"The problem is too big for this studio: its footprint is {footprint} (traced without running it), "
            f"running it once takes about {size_text(needed)}, and a problem's process may use at most {size_text(limit)} of "
            "memory. Make the sizes in get_inputs() smaller (KernelBench's full sizes are meant for a GPU) and upload "
            "it again; nothing was created.")
