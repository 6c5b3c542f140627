"""Resource limits for one sandboxed job, and how to apply them to the current process."""
from __future__ import annotations

import resource
from dataclasses import dataclass, field

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = field(default=120.0, metadata={
        "help": "Wall-clock limit; the whole process tree is killed when it passes."})
    cpu_seconds: int = field(default=600, metadata={
        "help": "CPU time (all threads) before the kernel sends SIGXCPU, then SIGKILL."})
    memory_bytes: int = field(default=16 * GIB, metadata={
        "help": "Resident memory of the job's whole process tree, watched by the zygote. On the CPU it is also the "
                "address-space rlimit over what the job's process had mapped at its start (CUDA reserves terabytes of virtual "
                "space, so not on GPUs)."})
    gpu_memory_fraction: float = field(default=0.9, metadata={
        "help": "Share of the GPU's memory the job's caching allocator may take."})
    file_size_bytes: int = field(default=256 * MIB, metadata={"help": "Largest file the job may write (RLIMIT_FSIZE)."})
    processes: int = field(default=256, metadata={
        "help": "Processes and threads in the job's tree (watched by the zygote; RLIMIT_NPROC too, which the kernel ignores "
                "for root)."})
    open_files: int = field(default=1024, metadata={"help": "Open file descriptors (RLIMIT_NOFILE)."})
    output_bytes: int = field(default=16_384, metadata={
        "help": "Captured stdout and stderr each keep this many bytes (head and tail)."})

    def __post_init__(self) -> None:
        if self.wall_seconds <= 0:
            raise ValueError("Limits.wall_seconds must be positive; set a wall-clock limit in seconds")
        if self.memory_bytes < 64 * MIB:
            raise ValueError("Limits.memory_bytes below 64 MiB cannot even start Python; raise it")
        if not 0 < self.gpu_memory_fraction <= 1:
            raise ValueError("Limits.gpu_memory_fraction must be in (0, 1]")


def apply_rlimits(limits: Limits, *, address_space: bool) -> None:
    """Set the kernel-enforced limits on this process (inherited by everything it starts)."""
    cpu = int(limits.cpu_seconds)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_size_bytes, limits.file_size_bytes))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits.open_files, limits.open_files))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if address_space:
        # On top of what is mapped already: the job forks from a zygote that has torch loaded, and a CUDA build of
        # torch maps gigabytes of libraries (cuDNN, cuBLAS, ...) before any candidate code runs, so a limit on the
        # whole space would leave a CPU job on a GPU machine no room to start (session 33: a CPU evaluation limited to
        # 4 GiB ended "without answering" on the H200 box, where it passes here). New allocations stay bounded by
        # memory_bytes.
        space = mapped_bytes() + limits.memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (space, space))


def mapped_bytes() -> int:
    """This process's virtual address space now (/proc/self/statm's first field, in pages)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()
