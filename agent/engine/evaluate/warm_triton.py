"""Imported by the zygote of a GPU sandbox where Triton is installed: pays once, in the warm parent, for what
every Triton candidate's process would otherwise pay on its first kernel call.

Measured on the H100 box (benchmarks/probes/triton_first_call.py, docs/benchmarks.md §3): a warm-cache first
call took 687 ms, 477 ms of it in triton.runtime.cache.triton_key(), which hashes Triton's own files (its
~400 MB libtriton among them) to key the cache, once per process (it is memoised). Computed here, every fork
inherits it. It reads files only and never touches CUDA (the zygote checks that after its preloads)."""
from __future__ import annotations

import logging

import triton  # noqa: F401 - the import itself is half the point (~1 s)

log = logging.getLogger(__name__)


def _warm_up() -> None:
    try:
        from triton.runtime.cache import triton_key
    except ImportError:  # another Triton layout: nothing to warm, the candidate pays as before
        return
    try:
        triton_key()
    except Exception as exc:  # noqa: BLE001 - warming is an optimisation; a job computes it again if needed
        log.warning("could not precompute Triton's cache key in the zygote: %s", exc)


_warm_up()
