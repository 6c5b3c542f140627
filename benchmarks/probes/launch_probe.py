"""Why does the same launch-bound model time differently in two processes? (issue 21's sweep, docs/benchmarks.md §16:
KernelBench level-3 networks of many small kernels, the problem's own code as the candidate, measured 0.56x to 1.34x
of eager with intervals that exclude 1.0)

Starts `--processes` fresh processes one after the other, each as the evaluation's jobs are (one import of the
problem, its model built, warmed up), and times `--calls` forward calls there: the wall time per call over the batch
(the parent's kind of clock), the device time (CUDA events) and the host's enqueue time (until the last call returns,
before the synchronisation: the launch cost the GPU waits on). Each process reports the CPUs it may run on, the CPUs
it did run on, and their NUMA nodes, beside the GPU's own NUMA-local CPUs (sysfs). Run once per placement:

  none    as the jobs run today: wherever the scheduler puts them
  compile_first  the same, after a torch.compile of the model in that process (as the reference's job does before
          it times eager)
  local   pinned to the CPUs of the GPU's NUMA node
  remote  pinned to the CPUs of another node (skipped on a one-node host)

If the spread between processes collapses under `local`, placement is the cause and both jobs should be pinned alike.

Usage (GPU box): python3 benchmarks/probes/launch_probe.py .kb/level3/20_MobileNetV2.py [--processes 6] [--calls 100]
Also runs on a CPU-only machine (device time then absent), as a check of the probe itself.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cpu_list(text: str) -> set[int]:
    """"0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if part:
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def numa_nodes() -> dict[int, set[int]]:
    """Each NUMA node's CPUs, from sysfs ({} where sysfs says nothing)."""
    nodes = {}
    for node in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        nodes[int(node.name[4:])] = cpu_list((node / "cpulist").read_text())
    return nodes


def gpu_local_cpus() -> set[int]:
    """The CPUs sysfs names as local to GPU 0 (empty without a GPU or where sysfs does not say)."""
    try:
        bus = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return set()
    if not bus:
        return set()
    # nvidia-smi prints 00000000:19:00.0; sysfs names it 0000:19:00.0
    domain, _, rest = bus.partition(":")
    path = Path("/sys/bus/pci/devices") / f"{domain[-4:]}:{rest}".lower() / "local_cpulist"
    return cpu_list(path.read_text()) if path.exists() else set()


def child(problem: Path, calls: int, compile_first: bool) -> dict:
    import psutil
    import torch

    sys.path.insert(0, str(problem.parent))
    namespace: dict = {"__name__": "problem"}
    exec(compile(problem.read_text(), str(problem), "exec"), namespace)  # noqa: S102 - a probe of our own, on our box
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]()).to(device)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in namespace["get_inputs"]()]
    if compile_first:  # as the reference's job does before it times eager: does compiling change eager's time?
        compiled = torch.compile(model)
        with torch.no_grad():
            compiled(*inputs)
            compiled(*inputs)
    me = psutil.Process()
    ran_on: set[int] = set()
    with torch.no_grad():
        for _ in range(10):  # first launches, allocator growth
            model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            began = time.perf_counter()
            for _ in range(calls):
                model(*inputs)
            enqueued = time.perf_counter()
            if cuda:
                end.record()
                torch.cuda.synchronize()
            done = time.perf_counter()
            ran_on.add(me.cpu_num())  # where the batch ended (read per call, it would add to the calls' time)
            samples.append({"wall_ms": (done - began) * 1000 / calls, "enqueue_ms": (enqueued - began) * 1000 / calls,
                            "device_ms": start.elapsed_time(end) / calls if cuda else None})
    best = min(samples, key=lambda s: s["wall_ms"])
    return {**{k: round(v, 4) if v is not None else None for k, v in best.items()},
            "affinity": sorted(os.sched_getaffinity(0)), "ran_on": sorted(ran_on)}


def parent(args: argparse.Namespace) -> dict:
    nodes, local = numa_nodes(), gpu_local_cpus()
    allowed = os.sched_getaffinity(0)
    local_node = next((n for n, cpus in nodes.items() if local and cpus & local), None)
    placements: dict[str, set[int] | None] = {"none": None, "compile_first": None}
    if local & allowed:
        placements["local"] = local & allowed
    remote = set().union(*(cpus for n, cpus in nodes.items() if n != local_node)) & allowed if nodes else set()
    if local and remote:
        placements["remote"] = remote
    out = {"problem": args.problem.name, "calls": args.calls, "numa_nodes": {n: sorted(c) for n, c in nodes.items()},
           "gpu_local_cpus": sorted(local), "placements": {}}
    node_of = {cpu: n for n, cpus in nodes.items() for cpu in cpus}
    for name, cpus in placements.items():
        rows = []
        for i in range(args.processes):
            command = [sys.executable, __file__, str(args.problem), "--child", "--calls", str(args.calls)]
            if name == "compile_first":
                command.append("--compile-first")
            if cpus:
                command = ["taskset", "-c", ",".join(map(str, sorted(cpus)))] + command
            done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
            if done.returncode:
                raise SystemExit(f"process {i} ({name}) failed:\n{done.stderr[-3000:]}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            row["nodes_ran_on"] = sorted({node_of.get(c, -1) for c in row["ran_on"]})
            rows.append(row)
            print(f"{name:13} process {i}: wall {row['wall_ms']:.3f} ms/call, enqueue {row['enqueue_ms']:.3f}, device "
                  f"{row['device_ms']}, ran on CPUs {row['ran_on']} (nodes {row['nodes_ran_on']})", flush=True)
        walls = [r["wall_ms"] for r in rows]
        summary = {"median_wall_ms": round(statistics.median(walls), 4),
                   "spread": round(max(walls) / min(walls), 3), "rows": rows}
        print(f"{name:13} median {summary['median_wall_ms']} ms/call, max/min across processes {summary['spread']}x",
              flush=True)
        out["placements"][name] = summary
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problem", type=Path, help="a KernelBench-style file (Model, get_inputs, get_init_inputs)")
    parser.add_argument("--processes", type=int, default=6, help="fresh processes per placement")
    parser.add_argument("--calls", type=int, default=100, help="forward calls per timed batch")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--compile-first", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.problem.resolve(), args.calls, args.compile_first)))
        return
    result = parent(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
