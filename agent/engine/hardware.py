"""What machine a measurement was taken on, in words a performance engineer recognises: the CPU's model name and
core count (and the architecture), not just "x86_64". Plain Python, no torch: the verdict's hardware facts start
here and the GPU's are added where CUDA is initialised (agent/engine/evaluate/jobs.py).

    facts = host_facts()   # {"host_cpu": "AMD EPYC 7R13 Processor", "cpu_model": ..., "cpu_arch": "x86_64", "cpu_count": 2}
"""
from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
# The field naming the processor: x86's "model name"; some ARM kernels say "Model" or "Hardware".
_MODEL_FIELDS = ("model name", "Model", "Hardware", "cpu model")


def cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The processor's marketing name from /proc/cpuinfo, whitespace squeezed; "" where it says none."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields and value.strip():
            fields[key.strip()] = " ".join(value.split())
    return next((fields[name] for name in _MODEL_FIELDS if name in fields), "")


def cpu_count() -> int | None:
    """The cores this process may run on (its affinity, as a container or taskset limits it), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def host_facts(cpuinfo: Path = CPUINFO) -> dict[str, Any]:
    """The host's facts for a verdict. host_cpu stays the key a label reads (agent.engine.roofline.hardware_name): the model
    name when known, else what platform says."""
    arch = platform.machine()
    model = cpu_model(cpuinfo)
    return {"host_cpu": model or platform.processor() or arch, "cpu_model": model, "cpu_arch": arch,
            "cpu_count": cpu_count()}


def describe(hardware: dict[str, Any]) -> str:
    """One line for pages and READMEs: "AMD EPYC 7R13 Processor, 2 cores" (with the GPU first when there is one)."""
    cpu = str(hardware.get("host_cpu") or hardware.get("cpu") or "unknown CPU")
    cores = hardware.get("cpu_count")
    line = f"{cpu}, {cores} cores" if cores else cpu
    return f"{hardware['gpu']} on {line}" if hardware.get("gpu") else line
