"""Profile summaries for the verdict: torch.profiler everywhere, Nsight Compute (ncu) where installed.

Both summaries are small JSON-serializable dicts ({"tool", "kernels", "total_us", ...}) so they can go
into `Verdict.profile`, into events for the browser, and into the agent's next observation as-is.
"""
from __future__ import annotations

import csv
import io
import os
import shutil
from collections.abc import Callable
from typing import Any

TOP_KERNELS = 15

# Templated CUDA kernel names can run to kilobytes; the head identifies the kernel well enough.
MAX_NAME_CHARS = 200

NCU_FALLBACK_PATH = "/usr/local/cuda/bin/ncu"


# --- torch.profiler -----------------------------------------------------------------------------


def torch_profiler_summary(fn: Callable[[], object], *, device: str, iterations: int = 5) -> dict[str, Any]:
    """Run `fn` `iterations` times under torch.profiler and summarise where the time went.

    On CUDA the ranking is by GPU time of the kernels themselves (plus memcpy/memset), which is what a
    kernel author can act on; on the CPU it is by self CPU time per operator, since there are no kernels.
    """
    # Imported here, not at module level: the ncu half of this module is used by processes that
    # should not pay for importing torch.
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    on_cuda = device.startswith("cuda")
    if not on_cuda and device != "cpu":
        raise ValueError(f"device={device!r}: profile on 'cpu' or 'cuda'")
    if iterations < 1:
        raise ValueError(f"iterations={iterations}: profile at least one iteration")

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    # One call outside the profiler: lazy initialisation, autotuning and first-call caches are not
    # what the candidate costs per call.
    fn()
    if on_cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        for _ in range(iterations):
            fn()
        if on_cuda:
            # Kernels still queued when the profiler stops would be missing from the trace.
            torch.cuda.synchronize()

    events = list(prof.key_averages())
    device_events = [e for e in events if e.device_type != DeviceType.CPU]
    if on_cuda and device_events:
        rows = [(e.key, e.count, e.self_device_time_total) for e in device_events]
        note = f"GPU time per kernel over {iterations} calls (one warm-up call not profiled)"
    else:
        rows = [(e.key, e.count, e.self_cpu_time_total) for e in events]
        note = f"self CPU time per operator over {iterations} calls (one warm-up call not profiled)"
        if on_cuda:
            note += "; no GPU kernels were recorded, so CPU time is shown"
    return {
        "tool": "torch.profiler",
        "device": device,
        "iterations": iterations,
        "kernels": _top_rows(rows),
        "total_us": round(sum(t for _, _, t in rows), 3),
        "note": note,
    }


def _top_rows(rows: list[tuple[str, int, float]]) -> list[dict[str, Any]]:
    total = sum(t for _, _, t in rows)
    top = sorted((r for r in rows if r[2] > 0), key=lambda r: r[2], reverse=True)[:TOP_KERNELS]
    return [
        {
            "name": _short(name),
            "calls": calls,
            "total_us": round(time_us, 3),
            "avg_us": round(time_us / calls, 3) if calls else 0.0,
            "pct": round(100.0 * time_us / total, 2) if total > 0 else 0.0,
        }
        for name, calls, time_us in top
    ]


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 3] + "..."


# --- Nsight Compute -----------------------------------------------------------------------------

DURATION = "gpu__time_duration.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
OCCUPANCY_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"  # achieved occupancy
REGISTERS = "launch__registers_per_thread"
SHARED_STATIC = "launch__shared_mem_per_block_static"
SHARED_DYNAMIC = "launch__shared_mem_per_block_dynamic"
GRID = "launch__grid_size"
BLOCK = "launch__block_size"

NCU_METRICS: list[str] = [DURATION, DRAM_PCT, SM_PCT, OCCUPANCY_PCT, REGISTERS, SHARED_STATIC, SHARED_DYNAMIC, GRID, BLOCK]


def ncu_available() -> bool:
    return shutil.which("ncu") is not None or os.access(NCU_FALLBACK_PATH, os.X_OK)


def _ncu_executable() -> str:
    return shutil.which("ncu") or (NCU_FALLBACK_PATH if os.access(NCU_FALLBACK_PATH, os.X_OK) else "ncu")


def ncu_command(python_argv: list[str], report_csv_path: str | os.PathLike[str]) -> list[str]:
    """The ncu command line that profiles `python_argv` and writes the raw-page CSV to `report_csv_path`.

    The profiled program brackets the call of interest with torch.cuda.profiler.start()/stop(), so
    imports, the reference model and warm-up are not profiled (--profile-from-start off).
    """
    return [
        _ncu_executable(),
        "--target-processes", "all",  # python_argv may be a launcher whose child does the work
        "--profile-from-start", "off",
        # Clocks as they run in the timed evaluation; locking them to base would make ncu's
        # durations disagree with the benchmark's.
        "--clock-control", "none",
        "--metrics", ",".join(NCU_METRICS),
        "--csv",
        "--page", "raw",
        # Base units ("ns", "byte/block") rather than auto-scaled ones, so launches are comparable;
        # parse_ncu_csv still honours whatever unit the second row names.
        "--print-units", "base",
        # The tool's output, CSV included, goes to this file; the program's own stdout stays apart.
        "--log-file", os.fspath(report_csv_path),
        *python_argv,
    ]


# Conversions from ncu's unit names to microseconds and bytes.
_TIME_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}
_SIZE_TO_BYTES = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9, "Kibyte": 1024, "Mibyte": 1024**2}


def parse_ncu_csv(text: str) -> dict[str, Any]:
    """Parse `ncu --csv --page raw` output: a header of metric names, a row of units, one row per launch.

    The raw page has every metric ncu gathered (about 300 columns on an H100, device attributes
    included), not only NCU_METRICS; columns are looked up by name. Kernels stay in launch order.

    Lines ncu writes around the table (==PROF==, ==WARNING==, ==ERROR==, program output in the same
    log) are skipped; a metric ncu could not collect comes back as None rather than failing the summary.
    """
    rows = _csv_rows(text)
    if not rows:
        return {"tool": "ncu", "kernels": [], "total_us": 0.0, "note": "no kernel was profiled: check that the program calls torch.cuda.profiler.start() around the work and that ncu may access the GPU counters"}
    header, units, launches = rows[0], rows[1] if len(rows) > 1 else [], rows[2:]
    unit = dict(zip(header, units))
    kernels = [_kernel(dict(zip(header, values)), unit) for values in launches]
    durations = [k["duration_us"] for k in kernels if k["duration_us"] is not None]
    return {"tool": "ncu", "kernels": kernels, "total_us": round(sum(durations), 3)}


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV table: from the header line (the one naming "Kernel Name") to the last quoted row."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"') and '"Kernel Name"' in line), None)
    if start is None:
        return []
    table = [line for line in lines[start:] if line.startswith('"')]
    return [row for row in csv.reader(io.StringIO("\n".join(table))) if row]


def _kernel(row: dict[str, str], unit: dict[str, str]) -> dict[str, Any]:
    static, dynamic = _number(row, SHARED_STATIC), _number(row, SHARED_DYNAMIC)
    shared = None if static is None and dynamic is None else (static or 0.0) * _size_factor(unit, SHARED_STATIC) + (dynamic or 0.0) * _size_factor(unit, SHARED_DYNAMIC)
    duration = _number(row, DURATION)
    return {
        "name": _short(row.get("Kernel Name", "")),
        # No unit named: --print-units base was in effect, and the base unit of a duration is the nanosecond.
        "duration_us": None if duration is None else round(duration * _TIME_TO_US.get(unit.get(DURATION, ""), 1e-3), 3),
        "dram_pct": _number(row, DRAM_PCT),
        "sm_pct": _number(row, SM_PCT),
        "occupancy_pct": _number(row, OCCUPANCY_PCT),
        "registers": _integer(_number(row, REGISTERS)),
        "shared_mem_bytes": _integer(shared),
        "grid": _integer(_number(row, GRID)),
        "block": _integer(_number(row, BLOCK)),
    }


def _size_factor(unit: dict[str, str], metric: str) -> float:
    # Shared memory comes as "byte/block" (H100, ncu 2025.3); the per-block part is already implied.
    # No unit named means base units, bytes.
    return _SIZE_TO_BYTES.get(unit.get(metric, "").split("/")[0], 1)


def _number(row: dict[str, str], metric: str) -> float | None:
    """A metric's value, or None where ncu left it out, printed "n/a", or the column is missing."""
    raw = row.get(metric)
    if raw is None:
        return None
    try:
        # ncu prints thousands separators ("1,234,567") in the default locale.
        return float(raw.replace(",", "").strip())
    except ValueError:
        return None


def _integer(value: float | None) -> int | None:
    return None if value is None else int(round(value))
