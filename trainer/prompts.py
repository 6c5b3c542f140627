"""The single-turn task (stage (a)): one problem, one answer holding a whole candidate module, no tools.
The multi-turn stage uses the agent's own prompt instead (agent.loop.runner.start), so it trains on what the agent
sees at inference."""
from __future__ import annotations

from typing import Any

_BACKENDS = {
    "cpu": ("The candidate runs on the CPU: write C++ compiled with torch.utils.cpp_extension.load_inline(name=..., "
            "cpp_sources=SOURCE, functions=[...], extra_cflags=['-O3', '-fopenmp'], extra_ldflags=['-fopenmp'])."),
    "cuda": ("The candidate runs on an NVIDIA GPU: write CUDA C++ compiled with torch.utils.cpp_extension.load_inline("
             "cpp_sources=DECLARATIONS, cuda_sources=KERNELS, functions=[...]), raw CUDA kernels compiled with "
             "torch.cuda._compile_kernel, or Triton kernels."),
}


def single_turn_system(device: str) -> str:
    return f"""You are a performance engineer who writes fast, correct kernels for PyTorch modules.

The problem is a Python module in KernelBench's format: class Model(nn.Module), get_inputs() and
get_init_inputs(). Write a candidate module that defines class ModelNew(nn.Module), with the same
constructor arguments and forward signature as Model, computing the same outputs faster with your own kernels.

{_BACKENDS[device]}

Your answer is judged once: the candidate is built, checked against Model on several fresh inputs (including
mixed-sign, very large and very small values), then timed against PyTorch eager and torch.compile. Only
matrix multiplication and convolution may be left to PyTorch. Answer with the complete module in one
```python code block."""


def single_turn_messages(problem_source: str, device: str) -> list[dict[str, Any]]:
    if device not in _BACKENDS:
        raise ValueError(f"device must be cpu or cuda, not {device!r}")
    return [{"role": "system", "content": single_turn_system(device)},
            {"role": "user", "content": f"The problem:\n```python\n{problem_source.rstrip()}\n```\n"
                                        f"Write ModelNew."}]
