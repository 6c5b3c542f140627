"""Where a kernel sits against the roofline of the hardware it was timed on.

The work comes from the problem's check in the sandbox (agent/engine/evaluate/jobs.py `work_estimate`): the
bytes any correct kernel must move (inputs, parameters, outputs) and the FLOPs torch's FlopCounterMode
counts for the reference (matmuls and convolutions; elementwise work is not counted). Achieved rates are
that work over the kernel's median time.

Ceilings are labelled with where they come from. The memory roof is the device's measured peak (the fastest
of the peaks job's memory kernels, agent/engine/evaluate/peaks.py) where a verdict carries one; else the
device-to-device copy bandwidth the check measured on the GPU when it did (DESIGN §4's measured facts);
otherwise a vendor datasheet figure, said to be one. No ceiling is invented for a CPU: the panel then says it
was not measured.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Roof:
    value: float  # bytes/s for memory, FLOP/s for compute
    source: str  # "measured: ..." or "datasheet: ..."


# Vendor datasheet peaks (dense, no sparsity), by a substring of torch's device name. Only used when
# nothing was measured, and always shown as "datasheet".
_DATASHEET: dict[str, dict[str, Roof]] = {
    "H100 80GB HBM3": {"memory": Roof(3.35e12, "datasheet: H100 SXM5 HBM3, 3.35 TB/s"),
                       "fp32": Roof(67e12, "datasheet: H100 SXM5 FP32 (no tensor cores), 67 TFLOP/s"),
                       "tensor": Roof(989e12, "datasheet: H100 SXM5 TF32/BF16 dense tensor cores, 989 TFLOP/s")},
    "H200": {"memory": Roof(4.8e12, "datasheet: H200 HBM3e, 4.8 TB/s"),
             "fp32": Roof(67e12, "datasheet: H200 FP32 (no tensor cores), 67 TFLOP/s"),
             "tensor": Roof(989e12, "datasheet: H200 TF32/BF16 dense tensor cores, 989 TFLOP/s")},
}


@dataclass(frozen=True)
class Placement:
    hardware: str
    candidate_ms: float | None
    bytes: int | None
    flops: int | None
    achieved_bytes_per_s: float | None
    achieved_flops_per_s: float | None
    intensity: float | None  # FLOP per byte
    memory_roof: Roof | None
    compute_roof: Roof | None
    bound: str  # "memory", "compute" or "" (no roofs)
    pct_of_roof: float | None  # achieved over the attainable roof at this intensity, in percent
    notes: list[str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def hardware_name(hardware: dict[str, Any]) -> str:
    return str(hardware.get("gpu") or hardware.get("host_cpu") or hardware.get("cpu") or "unknown hardware")


def place(work: dict[str, Any] | None, candidate_ms: float | None, hardware: dict[str, Any],
          peaks: dict[str, Any] | None = None) -> Placement:
    """The kernel's achieved rates and the hardware's roofs, with a note for every number that is missing. `peaks`
    are the device's measured peaks a verdict carries (timing.peaks, agent/engine/evaluate/peaks.py): the roofs then."""
    work = work or {}
    notes: list[str] = []
    name = hardware_name(hardware)
    moved, flops = work.get("bytes"), work.get("flops")
    if moved is None:
        notes.append("The problem's memory traffic was not recorded (the problem was checked before the studio "
                     "recorded work estimates); re-upload it to get one.")
    if not flops:
        notes.append("FlopCounterMode counted no FLOPs for the reference (it counts matmuls and convolutions, "
                     "not elementwise work), so the kernel is placed by its memory traffic only.")
    seconds = candidate_ms / 1000 if candidate_ms else None
    if seconds is None:
        notes.append("The kernel has no timing, so no achieved rate can be computed.")
    achieved_bytes = moved / seconds if moved and seconds else None
    achieved_flops = flops / seconds if flops and seconds else None
    intensity = flops / moved if flops and moved else None

    memory, compute = _measured_roofs(peaks) if peaks and peaks.get("copy_bytes_per_s") else _roofs(work, hardware, name, notes)
    bound, pct = "", None
    if memory and compute and intensity is not None and achieved_flops is not None:
        attainable = min(compute.value, memory.value * intensity)
        bound = "memory" if memory.value * intensity < compute.value else "compute"
        pct = 100.0 * achieved_flops / attainable
    elif memory and achieved_bytes is not None:
        bound, pct = "memory", 100.0 * achieved_bytes / memory.value
    return Placement(name, candidate_ms, moved, flops, achieved_bytes, achieved_flops, intensity, memory, compute,
                     bound, pct, notes)


def _measured_roofs(peaks: dict[str, Any]) -> tuple[Roof, Roof | None]:
    when = f" ({peaks['measured_at']})" if peaks.get("measured_at") else ""
    memory = Roof(float(peaks["copy_bytes_per_s"]), f"measured: the fastest of the studio's memory kernels (copies, elementwise, fill, sum){when}")
    if peaks.get("tensor_flops_per_s"):
        return memory, Roof(float(peaks["tensor_flops_per_s"]), f"measured: BF16 tensor-core matmul{when}")
    if peaks.get("fp32_flops_per_s"):
        return memory, Roof(float(peaks["fp32_flops_per_s"]), f"measured: FP32 matmul{when}")
    return memory, None


def speed_of_light_note(timing: dict[str, Any]) -> str:
    """What the verdict's speed-of-light figures mean, in words for the run page's roofline."""
    if timing.get("sol_fraction") is None:
        return ""
    bound = timing.get("sol_bound") or "memory"
    return (f"Speed of light: the problem's work takes at least {timing['sol_ms']:.4f} ms at this device's measured "
            f"peaks ({bound}-bound: {'its bytes at the copy bandwidth' if bound == 'memory' else 'its counted FLOPs at the fastest compute roof'}); "
            f"the kernel runs at {timing['sol_fraction']:.1%} of it. A time more than 1.5x below the memory bound (after "
            "what the last-level cache could hold) is physically impossible and is rejected as beyond_roofline; the "
            "counted FLOPs are the reference's algorithm's, so the compute bound is reported, not enforced.")


def _roofs(work: dict[str, Any], hardware: dict[str, Any], name: str, notes: list[str]) -> tuple[Roof | None, Roof | None]:
    if not hardware.get("gpu"):
        notes.append(f"No roofline ceilings were measured for {name} (a CPU): achieved rates are shown without a roof.")
        return None, None
    sheet = next((v for k, v in _DATASHEET.items() if k in name), None)
    memory = None
    if work.get("copy_bytes_per_s"):
        memory = Roof(float(work["copy_bytes_per_s"]), "measured: device-to-device copy on this GPU when the problem was checked")
    elif sheet:
        memory = sheet["memory"]
        notes.append("The memory roof is the datasheet figure: no copy bandwidth was measured on this GPU.")
    compute = sheet["fp32"] if sheet else None
    if compute is not None:
        notes.append("The compute roof is the datasheet FP32 figure (not measured); tensor-core kernels can exceed it "
                     f"up to {sheet['tensor'].value / 1e12:.0f} TFLOP/s.")
    if memory is None or compute is None:
        notes.append(f"No datasheet figures are known for {name}: the missing roofs are not drawn.")
    return memory, compute
