"""Memory planning: from the problem's footprint (traced on meta tensors, nothing allocated) to how an evaluation
runs on the device, before anything runs.

The footprint job (footprint.py, the problem's code in the reference's kind of sandbox) builds the model and its
inputs on the meta device and runs forward there: shapes and dtypes only. From the input, weight and output bytes
the parent (this module, trusted) estimates each job's peak on the device: the harness's own allocations, term by
term as the jobs make them (below), plus one output-sized workspace for the forward itself. Then:

- **beside**: both jobs hold their device memory at once (the reference runs beside the candidate), when the two
  peaks fit the budget together;
- **after**: the sequential fallback. Whichever job the parent is not driving parks its device state on the host
  (reference_job.py / candidate_job.py `park`), so the reference's work runs after the candidate's, never beside
  it: the peak is one job's working set plus the other's idle remainder (its CUDA context, and the candidate's
  own weights, which stay its business);
- **capacity**: not even that fits. The verdict says so (Status.CAPACITY), naming the footprint and the limit;
  no job is started and nothing is charged to the candidate.

The budget is `EvalConfig.device_memory_bytes`; where it is None, a GPU's total memory as the footprint job read
it, and on the CPU no budget (the CPU's "device memory" is host RAM, bounded by each job's memory limit; tests set
a budget to force the planner). The estimates are of our harness; a problem's forward that needs more workspace
than one output's size can still run out of memory, which the reference's job then reports as the engine's
(capacity), never the candidate's.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import agent.engine.evaluate.keyed as keyed
from agent.engine.memory_text import size_text
from agent.engine.sandbox.limits import Limits

BESIDE, AFTER, CAPACITY = "beside", "after", "capacity"
GIB = 1 << 30
# A CUDA context and the caching allocator's slack, per job on a GPU (an H100 context is ~0.5 GiB).
CONTEXT_BYTES = {"cuda": GIB, "cpu": 0}
# Outputs are compared and read back in pieces of at most this many bytes (compare.py, reference_job.py).
CHUNK_BYTES = 256 << 20
# The most the candidate's job poisons at once with several blocks per output (poison_blocks).
POISON_BYTES = GIB
# Python with torch imported, resident, before a problem allocates anything (about 0.4-0.6 GiB on x86-64).
INTERPRETER_BYTES = GIB
# The share of the host's free memory the sequential fallback's parked state may take (the rest is the jobs' own).
HOST_SHARE = 0.8
# Room in a file the jobs hand tensors through (tensor_file.py) beyond its tensors: each tensor's place is rounded up
# to a page, and a set has small tensors and scalars too.
FILE_SLACK = 64 << 20


@dataclass(frozen=True)
class Footprint:
    """One input set's bytes as the problem declares them (meta tensors): what every job holds at least."""

    input_bytes: int
    weight_bytes: int
    output_bytes: int
    input_elements: int
    output_elements: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Footprint:
        return cls(**{k: int(data[k]) for k in cls.__dataclass_fields__})

    def describe(self) -> str:
        return (f"inputs {size_text(self.input_bytes)}, weights {size_text(self.weight_bytes)}, "
                f"outputs {size_text(self.output_bytes)}")


@dataclass
class MemoryPlan:
    """How the evaluation uses the device. Reported in the verdict (`memory`)."""

    mode: str  # BESIDE, AFTER or CAPACITY
    budget_bytes: int | None  # None: no budget (the CPU without one set)
    budget_source: str
    footprint: dict[str, Any] = field(default_factory=dict)  # Footprint of the largest input set, as a dict
    candidate_peak_bytes: int = 0
    reference_peak_bytes: int = 0
    candidate_idle_bytes: int = 0
    reference_idle_bytes: int = 0
    # What each job would move to the host if it parks (AFTER on a GPU): then its limit on resident memory is raised
    # by as much for this evaluation, or a problem of 6 GiB tensors would be killed at the job's usual 16 GiB.
    candidate_host_bytes: int = 0
    reference_host_bytes: int = 0
    # On a GPU, the host files the jobs hand tensors through (host_files): sized to the problem, and each job's limit
    # on resident memory is raised by both (mapped while written and read, their pages count as the job's), or a
    # problem of 16 GiB inputs would not fit the exchange file nor a job's usual 16 GiB. 0: the jobs' usual limits.
    exchange_bytes: int = 0
    outputs_bytes: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def park(self) -> bool:
        return self.mode == AFTER

    def capacity_message(self) -> str:
        fp = Footprint.from_dict(self.footprint)
        need = max(self.candidate_peak_bytes + self.reference_idle_bytes, self.reference_peak_bytes + self.candidate_idle_bytes)
        return (f"the problem does not fit the device: its footprint is {fp.describe()}; evaluating it needs about "
                f"{size_text(self.candidate_peak_bytes)} in the candidate's job and {size_text(self.reference_peak_bytes)} in "
                f"the reference's (at least {size_text(need)} with one run after the other), and the limit is "
                f"{size_text(self.budget_bytes or 0)} ({self.budget_source}). This is the problem's size, not the "
                f"candidate's fault: evaluate it on a device with more memory, or make the problem smaller")


def candidate_peak(fp: Footprint, device: str) -> int:
    """The candidate's job at its largest: its weights and the two base sets it keeps for timing, plus
    - a checked call: that call's inputs and the copy the mutation check compares with (calls 0 and 1 use the kept
      base set), its outputs and the copy that sees late writes, the freed blocks it poisons before the call
      (poison_bytes) and the forward's workspace;
    - a timed call: the keyed inputs, their mask draws (_masks), the outputs and its own null batch's stand-in
      outputs, the projection's weight draws and pieces (_weights) and the forward's workspace."""
    checked = 4 * fp.input_bytes + 2 * fp.output_bytes + poison_bytes(fp.output_bytes) + _workspace(fp)
    timed = 3 * fp.input_bytes + _masks(fp, device) + 2 * fp.output_bytes + _weights(fp) + _workspace(fp)
    return CONTEXT_BYTES[device] + fp.weight_bytes + max(checked, timed)


def reference_peak(fp: Footprint, device: str) -> int:
    """The reference's job at its largest: its weights, the two base sets and the null batch's stand-in outputs,
    plus
    - a compare: the call's inputs, the reference's outputs, the candidate's read back in pieces, and the
      comparison's float32 temporaries of one piece;
    - a verify: the keyed inputs and masks, the outputs, the weight draws and the bound's float32 temporaries of one
      piece (four per element)."""
    piece = min(fp.output_bytes, CHUNK_BYTES)
    compare = fp.input_bytes + fp.output_bytes + piece + 4 * piece
    verify = fp.input_bytes + _masks(fp, device) + fp.output_bytes + _weights(fp) + 16 * min(fp.output_elements, keyed.PIECE)
    kept = fp.weight_bytes + 2 * fp.input_bytes + fp.output_bytes
    return CONTEXT_BYTES[device] + kept + max(compare, verify) + _workspace(fp)


def _masks(fp: Footprint, device: str) -> int:
    """The keyed mix's draws (keyed.Pools): on a GPU pool_size bool draws per element for integer inputs (counted for
    every input: the footprint does not tell them apart), mixed a piece at a time, and a piece of fresh coefficients
    (up to float64) for floating ones (keyed._lerped); on the CPU the draws are of the inputs' own dtype, and a mix
    keeps a difference and makes no temporary (mixed_cpu)."""
    draws = keyed.pool_size(fp.input_elements)
    if device == "cuda":
        return draws * fp.input_elements + 10 * min(fp.input_elements, keyed.PIECE)
    return (draws + 1) * fp.input_bytes


def _weights(fp: Footprint) -> int:
    """The projection's weight draws (float32, weight_pool_size per element) and a piece's product and roll."""
    return 4 * keyed.weight_pool_size(fp.output_elements) * fp.output_elements + 8 * min(fp.output_elements, keyed.PIECE)


def check_peak(fp: Footprint) -> int:
    """The upload check's process at its largest on the CPU (session.check_reference): the interpreter and torch,
    the weights, one input set and the copy handed over in the exchange file, the outputs and a forward's
    workspace."""
    return INTERPRETER_BYTES + fp.weight_bytes + 2 * fp.input_bytes + fp.output_bytes + _workspace(fp)


def candidate_parked(fp: Footprint) -> int:
    """What the candidate's job parks (candidate_job.move): the two kept input sets. Its model stays its own."""
    return 2 * fp.input_bytes


def reference_parked(fp: Footprint) -> int:
    """What the reference's job parks (reference_job.move): its weights, the two base sets and, while the candidate
    answers a checked call, that call's inputs (the stand-in outputs are dropped and remade)."""
    return fp.weight_bytes + 3 * fp.input_bytes


def plan(footprints: list[Footprint], device: str, budget: int | None, budget_source: str,
         host_available: int | None = None) -> MemoryPlan:
    """The mode for the largest of the input sets (the main one and any variants). `host_available`: the host
    memory free now (on a GPU), which the sequential fallback's parked state must fit."""
    fp = max(footprints, key=lambda f: (f.input_bytes + f.output_bytes, f.output_elements))
    cand, ref = candidate_peak(fp, device), reference_peak(fp, device)
    cand_idle = CONTEXT_BYTES[device] + fp.weight_bytes
    ref_idle = CONTEXT_BYTES[device]
    made = MemoryPlan(BESIDE, budget, budget_source, asdict(fp), cand, ref, cand_idle, ref_idle)
    if device == "cuda":  # on the CPU, parking moves nothing, and the files are within the jobs' usual limits
        made.candidate_host_bytes, made.reference_host_bytes = candidate_parked(fp), reference_parked(fp)
        made.exchange_bytes, made.outputs_bytes = host_files(fp)
        files = made.exchange_bytes + made.outputs_bytes
        if host_available is not None and files > HOST_SHARE * host_available:
            made.mode = CAPACITY
            made.note = _host_note(f"the jobs hand its tensors over through about {size_text(files)} of host memory",
                                   host_available, fp)
            return made
    if budget is None or cand + ref <= budget:
        return made
    if max(cand + ref_idle, ref + cand_idle) <= budget:
        made.mode = AFTER
        made.note = (f"the two jobs need about {size_text(cand + ref)} together, over the {size_text(budget)} limit: the "
                     "reference's work runs after the candidate's, each parking its device memory on the host while "
                     "the other works")
        if device == "cuda":
            parked = made.candidate_host_bytes + made.reference_host_bytes
            files = made.exchange_bytes + made.outputs_bytes
            if host_available is not None and parked + files > HOST_SHARE * host_available:
                made.mode = CAPACITY
                made.note = _host_note(f"one job after the other on the GPU, the jobs park about {size_text(parked)} on "
                                       f"the host beside the {size_text(files)} they hand tensors through",
                                       host_available, fp)
        return made
    made.mode = CAPACITY
    made.note = made.capacity_message()
    return made


def _host_note(need: str, host_available: int, fp: Footprint) -> str:
    """A capacity verdict's words where the host, not the device, is what the problem does not fit."""
    return (f"the problem does not fit this machine: {need}, and the host has {size_text(host_available)} free (at most "
            f"{HOST_SHARE:.0%} of it is used). Its footprint is {fp.describe()}. This is the problem's size, not the "
            f"candidate's fault: evaluate it on a machine with more memory, or make the problem smaller")


def host_files(fp: Footprint) -> tuple[int, int]:
    """On a GPU, the sizes of the two host files the jobs hand tensors through (tensor_file.py; the parent lends them,
    evaluator.py): the exchange file holds the weights, or at most two input sets at once (the timing's base sets,
    reference_job.set_bases), and the outputs file one call's outputs."""
    return max(fp.weight_bytes, 2 * fp.input_bytes) + FILE_SLACK, fp.output_bytes + FILE_SLACK


def job_limits(made: MemoryPlan, candidate: Limits, reference: Limits) -> tuple[Limits, Limits]:
    """The two jobs' limits for this plan (the figures are the parent's, from the traced footprint, never a job's).
    On a GPU each job maps the two host files as it writes and reads them: room for both beside its usual
    resident-memory limit. Where each parks its device state on the host (AFTER on a GPU): room for that too, and the
    candidate's job lives as long as the reference's may, since the engine's moves and the reference's work now pass
    inside its lifetime. Each command the candidate answers keeps its own deadline (session.py), so a hang is still
    the candidate's, and the engine's time never is."""
    files = made.exchange_bytes + made.outputs_bytes
    candidate = replace(candidate, memory_bytes=candidate.memory_bytes + files)
    reference = replace(reference, memory_bytes=reference.memory_bytes + files)
    if not made.park:
        return candidate, reference
    return (replace(candidate, memory_bytes=candidate.memory_bytes + made.candidate_host_bytes,
                    wall_seconds=max(candidate.wall_seconds, reference.wall_seconds)),
            replace(reference, memory_bytes=reference.memory_bytes + made.reference_host_bytes))


def after_out_of_memory(made: MemoryPlan, job: str = "candidate") -> MemoryPlan | None:
    """The plan to retry with, one job after the other, when `job` ("candidate" or "reference") ran out of device
    memory beside the other's (the plan's estimates are ours, allocator caches are not); None where it ran so already
    or that cannot fit."""
    if made.mode != BESIDE or made.budget_bytes is None:
        return None
    if max(made.candidate_peak_bytes + made.reference_idle_bytes,
           made.reference_peak_bytes + made.candidate_idle_bytes) > made.budget_bytes:
        return None
    other = "reference" if job == "candidate" else "candidate"
    return replace(made, mode=AFTER, note=f"retried one job after the other: the {job}'s job ran out of device memory "
                                          f"beside the {other}'s")


def unplanned(note: str, device: str, budget: int | None, budget_source: str) -> MemoryPlan:
    """No footprint could be traced (forward reads values a meta tensor does not have): run as before, beside."""
    return MemoryPlan(BESIDE, budget, budget_source, {}, note=f"no footprint: {note}"[:500])


def poison_blocks(nbytes: int) -> int:
    """Blocks of one output's size the candidate's job fills with NaN bytes before each checked call (candidate_job
    _poison): four, so that every freed block of that size is taken, unless four would pass POISON_BYTES; then one
    (the block the last call's output left is still the first the allocator hands out)."""
    return 4 if 4 * nbytes <= POISON_BYTES else 1


def poison_bytes(output_bytes: int) -> int:
    return poison_blocks(output_bytes) * output_bytes


def _workspace(fp: Footprint) -> int:
    """What a forward may allocate for itself: one output's size (a pointwise chain's intermediate)."""
    return fp.output_bytes
