"""The build backends a candidate's kernels can come from (DESIGN §3): one vocabulary for the engine's config, the
static guess, the command line, the upload form and the API."""
from __future__ import annotations

# In the order a guess prefers them: one candidate may mix backends, and the one doing GPU work wins over C++ glue.
BACKENDS = ("cuda", "nvrtc", "triton", "cpp")

# What a person is shown for each.
LABELS = {"cpp": "C++ (CPU)", "cuda": "CUDA C++", "nvrtc": "NVRTC", "triton": "Triton"}


def in_words() -> str:
    """"cuda, nvrtc, triton or cpp": for a message that says what to choose."""
    return ", ".join(BACKENDS[:-1]) + " or " + BACKENDS[-1]
