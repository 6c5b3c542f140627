"""How memory is spoken of, for the engine and the studio alike (no torch here: the web process imports it): sizes in
words, and whether a job's error text says it ran out of memory."""
from __future__ import annotations

import re

# What a process says when it ran out of memory: torch's CUDA and CPU allocators, Python, ENOMEM's own text ("Cannot
# allocate memory": mapping the file that carries a large input fails so at the address-space limit, seen importing
# KernelBench's 8 GiB matrix-vector problem) and the sandbox's watch ("exceeded the memory limit").
_OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|out of memory|DefaultCPUAllocator|can't allocate memory|"
                            r"cannot allocate memory|MemoryError|memory limit", re.IGNORECASE)


def ran_out_of_memory(message: str) -> bool:
    return bool(_OUT_OF_MEMORY.search(message or ""))


def size_text(n: float) -> str:
    """Bytes in words: "512 bytes", "1.5 KiB", "6.0 GiB"."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} bytes"
