"""The built-in policy over examples/*.py: how many it gets accepted, and how fast those kernels are;
or, given a KernelBench checkout, how many of its problems the policy plans (CPU only).

Each example runs in its own `python -m agent optimize ... --policy builtin --json` process, so a crash
or a hang in one cannot take the others down; a run that prints no JSON, exits abnormally or runs past
--timeout counts as not accepted, with the reason (and the tail of its stderr) recorded.

Planning count: every problem of the given levels is traced in the sandbox on meta tensors and planned,
and its first CUDA candidate written, as the policy's first turn does; nothing is compiled or run. A
refused problem is listed with what stopped it.

Run over a KernelBench checkout (--run, issue 23's acceptance on the GPU box): the policy on every problem of the
levels at the problem's own size, one optimize process each, resumable (a JSON-lines --state file: a rerun skips
what it holds) and bounded (--seconds: no problem is started past it), so that the sweep spreads over device calls.
A problem the policy does not plan ends at once and counts as not planned; the report gives per level the planned
problems, how many were accepted, and the geometric-mean speedup against the best of eager and torch.compile.

Usage: python benchmarks/builtin_policy.py /path/to/KernelBench --levels 1,2,3 --out plans.json
       python benchmarks/builtin_policy.py /path/to/KernelBench --run --levels 1,2 --device cuda --state var/b.jsonl \
           --seconds 540 --out var/b.md
       python benchmarks/builtin_policy.py --device cuda --max-turns 8 --out results.json
       python benchmarks/builtin_policy.py --device cuda --prebuild 14 --only softmax_rows,row_max
       python benchmarks/builtin_policy.py --device cpu --only relu_scale_bias,softmax_rows
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
STDERR_TAIL = 2000  # enough for a traceback's last frames without flooding the results file

Result = dict[str, Any]


def run_example(path: Path, *, device: str, max_turns: int, timeout: float, gpu: int | None = None) -> Result:
    """One optimize run in a fresh process; `gpu`: the only GPU it sees (CUDA_VISIBLE_DEVICES), None: as inherited."""
    command = [sys.executable, "-m", "agent", "optimize", str(path), "--policy", "builtin",
               "--device", device, "--json", "--max-turns", str(max_turns)]
    env = None if gpu is None else {**os.environ, "CUDA_VISIBLE_DEVICES": str(gpu)}
    return run_command(path.stem, command, timeout, env)


def run_command(example: str, command: list[str], timeout: float, env: dict[str, str] | None = None) -> Result:
    """Run one optimize command; always returns a result, never raises for the run's own failures."""
    started = time.monotonic()
    # A session of its own, so a timeout can end the run's sandbox and compiler processes with it.
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the whole group ended between the timeout and the kill
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # a process outside the group still holds the pipes
            proc.wait()  # the run itself led the group, so it is dead already
            stderr = ""
        return _failure(example, f"timeout after {timeout:g} s", stderr, proc.returncode, time.monotonic() - started)
    elapsed = time.monotonic() - started
    outcome = _json_document(stdout)
    if outcome is None:
        return _failure(example, f"exit {proc.returncode} without a JSON result", stderr, proc.returncode, elapsed)
    if not isinstance(outcome, dict):
        return _failure(example, f"exit {proc.returncode} with JSON that is not an object", stderr, proc.returncode, elapsed)
    # Exit 1 with JSON is an ordinary "ran, nothing accepted"; the outcome says why.
    return {**outcome, "example": example, "exit_code": proc.returncode, "stderr_tail": stderr[-STDERR_TAIL:],
            "process_seconds": elapsed}


def _json_document(stdout: str) -> Any:
    """The run's JSON: the whole of stdout, or else its last line (should a library have printed before it)."""
    lines = stdout.strip().splitlines()
    for text in (stdout, lines[-1] if lines else ""):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            continue
    return None


def _failure(example: str, reason: str, stderr: str | None, exit_code: int | None, elapsed: float) -> Result:
    tail = (stderr or "")[-STDERR_TAIL:]
    last_line = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    return {"example": example, "status": "failed", "stop_reason": f"{reason}: {last_line}" if last_line else reason,
            "policy": "builtin", "turns": None, "wall_seconds": elapsed, "verdict": None,
            "exit_code": exit_code, "stderr_tail": tail, "process_seconds": elapsed}


def prebuild(paths: list[Path], device: str, jobs: int, first: int | None = None) -> float:
    """Compile every variant the policy will propose for these problems into the shared build cache, `jobs` builds at
    once, so that the runs after it time turns, not nvcc (a lent GPU box's minutes are short; its 16 cores build in
    parallel what the runs would build one after the other). The sources are the policy's own (the same trace, plan,
    variants and templates: policy.make_plan); a problem the policy does not plan, or a variant with nothing to
    compile (library calls alone), is skipped. `first`: only each problem's first that many variants (the policy stops
    at a variant near its roof, so the later ones are often never evaluated). Returns the seconds it took."""
    import tempfile

    from agent.builtin.policy import candidate_source, make_plan, variants
    from agent.builtin.trace import trace_graph
    from agent.engine.evaluate import EvalConfig, Evaluator

    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix="kstudio-prebuild-"))
    files = []
    with Evaluator(EvalConfig(device=device, compile_baseline=False)) as evaluator:
        for path in paths:
            try:
                plan = make_plan(trace_graph(evaluator, path.read_text()), device)
            except Exception as exc:  # noqa: BLE001 - PolicyError, or a problem that fails to trace: its run says why
                print(f"prebuild {path.stem}: not planned ({str(exc)[:120]})", file=sys.stderr, flush=True)
                continue
            for i, variant in enumerate(variants(plan, device)[:first]):
                source = candidate_source(plan, variant, device)
                if "load_inline(" in source:
                    file = folder / f"{path.stem}_{i}.py"
                    file.write_text(source)
                    files.append(file)

    build_files(files, device, jobs)
    return time.monotonic() - started


def build_files(files: list[Path], device: str, jobs: int) -> None:
    """Compile each candidate file into the shared build cache (`python -m agent build`, this tree's build tool),
    `jobs` at once, saying of each whether it built."""
    from concurrent.futures import ThreadPoolExecutor

    def build(file: Path) -> str:
        done = subprocess.run([sys.executable, "-m", "agent", "build", str(file), "--device", device, "--json"],
                              cwd=ROOT, capture_output=True, text=True)
        return f"{file.stem}: {'built' if done.returncode == 0 else 'FAILED ' + done.stdout[-300:] + done.stderr[-300:]}"

    with ThreadPoolExecutor(jobs) as pool:
        for line in pool.map(build, files):
            print(f"prebuild {line}", file=sys.stderr, flush=True)


def accepted(result: Result) -> bool:
    verdict = result.get("verdict")
    return isinstance(verdict, dict) and verdict.get("status") == "accepted"


def _timing(result: Result, key: str) -> float | None:
    timing = (result.get("verdict") or {}).get("timing") or {}
    value = timing.get(key)
    return float(value) if isinstance(value, (int, float)) else None


def _geomean(values: list[float]) -> float | None:
    positive = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in positive) / len(positive)) if positive else None


def summarise(results: list[Result]) -> dict[str, Any]:
    """Acceptance over all examples; speedups over the accepted ones only (a failure has no speed)."""
    good = [r for r in results if accepted(r)]
    vs_eager = [v for r in good if (v := _timing(r, "speedup_vs_eager")) is not None]
    # The compile baseline can be missing (it failed or was skipped); average over the ones that have it.
    vs_compile = [v for r in good if (v := _timing(r, "speedup_vs_compile")) is not None]
    total = len(results)
    return {"accepted": len(good), "total": total, "accepted_pct": 100.0 * len(good) / total if total else 0.0,
            "geomean_vs_eager": _geomean(vs_eager), "geomean_vs_compile": _geomean(vs_compile),
            "compile_compared": len(vs_compile)}


def _cell(text: str) -> str:
    # A stop reason can hold pipes and newlines, which would break the table's row.
    return " ".join(text.split()).replace("|", "\\|")


def _num(value: float | None, digits: int, suffix: str = "") -> str:
    return "—" if value is None else f"{value:.{digits}f}{suffix}"


def markdown(results: list[Result], summary: dict[str, Any], machine: str) -> str:
    lines = ["| example | accepted | speedup vs eager | speedup vs torch.compile | candidate ms | eager ms | compile ms | turns | wall s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        verdict_status = (r.get("verdict") or {}).get("status")
        why = r.get("stop_reason") or verdict_status or r.get("status") or "unknown"
        ok = "yes" if accepted(r) else f"no ({_cell(str(why))})"
        turns = r.get("turns")
        wall = r.get("wall_seconds")
        lines.append(f"| {r['example']} | {ok} | {_num(_timing(r, 'speedup_vs_eager'), 2, 'x')} "
                     f"| {_num(_timing(r, 'speedup_vs_compile'), 2, 'x')} | {_num(_timing(r, 'candidate_ms'), 4)} "
                     f"| {_num(_timing(r, 'eager_ms'), 4)} | {_num(_timing(r, 'compile_ms'), 4)} "
                     f"| {'—' if turns is None else turns} | {_num(wall, 1)} |")
    s = summary
    lines += ["", f"accepted {s['accepted']}/{s['total']} ({s['accepted_pct']:.0f}%); geometric-mean speedup over the "
                  f"accepted: {_num(s['geomean_vs_eager'], 2, 'x')} vs eager, "
                  f"{_num(s['geomean_vs_compile'], 2, 'x')} vs torch.compile "
                  f"({s['compile_compared']} with a compile baseline); machine: {machine}"]
    return "\n".join(lines) + "\n"


def machine(device: str) -> str:
    if device == "cuda":
        try:
            hardware = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30).stdout.strip().replace("\n", ", ") or "unknown GPU"
        except (OSError, subprocess.TimeoutExpired):
            hardware = "unknown GPU (nvidia-smi not available)"
    else:
        hardware = f"{_cpu_model()}, {os.cpu_count()} cores"
    try:
        # The installed version, read without importing torch: this script only starts processes.
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "not installed"
    return f"torch {torch_version}, {hardware}"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _examples(only: str | None) -> list[Path]:
    if not only:
        return sorted(EXAMPLES.glob("*.py"))
    paths = [EXAMPLES / f"{name.strip().removesuffix('.py')}.py" for name in only.split(",") if name.strip()]
    missing = [p.stem for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"error: no example {', '.join(missing)} in {EXAMPLES}; pass names from examples/*.py to --only")
    return paths


def _write(out: Path, args: argparse.Namespace, results: list[Result], host: str) -> None:
    out.write_text(json.dumps({"device": args.device, "max_turns": args.max_turns, "machine": host,
                               "summary": summarise(results), "results": results}, indent=2))


def level_folder(root: Path, level: int) -> Path:
    """A KernelBench checkout's level folder: <root>/KernelBench/level<N> or <root>/level<N>."""
    for folder in (root / "KernelBench" / f"level{level}", root / f"level{level}"):
        if folder.is_dir():
            return folder
    raise SystemExit(f"error: no level{level} folder under {root} (or {root}/KernelBench); pass a KernelBench checkout")


def plan_problem(source: str, tracer: Any) -> str | None:
    """None when the built-in policy plans the problem and writes its first CUDA candidate; else why not."""
    from agent.builtin.policy import BuiltinPolicy
    from agent.loop.policies.base import PolicyError

    try:
        BuiltinPolicy(source, tracer, "cuda").respond([{"role": "system", "content": ""}], [])
    except PolicyError as exc:
        return str(exc)
    return None


def stopping_op(reason: str) -> str:
    """The part of a refusal that names what stopped the plan (the policy's closing advice dropped)."""
    text = reason.removeprefix("the built-in policy cannot optimize this module: ")
    if "Traceback (most recent call last)" in text:  # the problem itself failed to import or build
        return "the problem could not be traced: " + text.strip().splitlines()[-1].strip()
    return text.split(". It ")[0].split("; use an LLM")[0]


def count_planned(root: Path, levels: list[int]) -> list[Result]:
    from agent.builtin.trace import trace_graph
    from agent.engine.evaluate import EvalConfig, Evaluator

    results: list[Result] = []
    with Evaluator(EvalConfig(device="cpu", compile_baseline=False)) as evaluator:
        for level, path in kernelbench_problems(root, levels):
            started = time.monotonic()
            reason = plan_problem(path.read_text(), lambda source: trace_graph(evaluator, source))
            results.append({"level": level, "problem": path.stem, "planned": reason is None,
                            "stopped_by": None if reason is None else stopping_op(reason),
                            "seconds": time.monotonic() - started})
            print(f"level {level} {path.stem}: {'planned' if reason is None else stopping_op(reason)}",
                  file=sys.stderr, flush=True)
    return results


def count_markdown(results: list[Result]) -> str:
    levels = sorted({r["level"] for r in results})
    lines = ["| level | planned | problems |", "| --- | --- | --- |"]
    for level in levels:
        mine = [r for r in results if r["level"] == level]
        lines.append(f"| {level} | {sum(r['planned'] for r in mine)} | {len(mine)} |")
    refused = [r for r in results if not r["planned"]]
    if refused:
        lines += ["", "| level | problem | stopped by |", "| --- | --- | --- |"]
        lines += [f"| {r['level']} | {r['problem']} | {_cell(r['stopped_by'])} |" for r in refused]
    return "\n".join(lines) + "\n"


_NOT_PLANNED = "the built-in policy cannot optimize this module"
_KEPT = ("speedup_vs_eager", "speedup_vs_compile", "speedup_vs_best", "sol_fraction", "candidate_ms")


def kernelbench_problems(root: Path, levels: list[int]) -> list[tuple[int, Path]]:
    """Every problem of the levels, in KernelBench's own order (1_, 2_, ..., 10_)."""
    return [(level, path) for level in levels for path in sorted(level_folder(root, level).glob("*.py"),
                                                                 key=lambda p: (len(p.name.split("_")[0]), p.name))]


def run_kernelbench(root: Path, levels: list[int], *, device: str, max_turns: int, timeout: float, state: Path,
                    seconds: float | None = None, prebuild_jobs: int = 0, prebuild_window: int = 24,
                    prebuild_first: int | None = None, gpus: int = 1) -> list[Result]:
    """The policy on each problem not yet in `state`, appending one line per problem as it ends; returns every line
    of the state (the earlier passes' too). Starts no problem that would end past `seconds` if it took as long as
    the longest of this pass so far (but always one per pass and GPU), so that a device call's limit is not reached
    mid-problem. `prebuild_jobs`: first compile the variants of the next `prebuild_window` problems without a line,
    that many builds at once (prebuild). `gpus` > 1: that many problems at once, each alone on its own GPU
    (CUDA_VISIBLE_DEVICES), so a box of several GPUs measures several problems in the time of one; every figure of a
    problem is still a ratio measured side by side on one GPU."""
    from concurrent.futures import ThreadPoolExecutor
    import threading

    done = read_state(state)
    seen = {(r["level"], r["problem"]) for r in done}
    pending = [(level, path) for level, path in kernelbench_problems(root, levels) if (level, path.stem) not in seen]
    started, lock = time.monotonic(), threading.Lock()
    longest = [0.0]  # the longest problem of this pass, over every GPU
    if prebuild_jobs:
        took = prebuild([path for _, path in pending[:prebuild_window]], device, prebuild_jobs, prebuild_first)
        print(f"prebuilt the variants of the next {min(len(pending), prebuild_window)} problems in {took:.1f} s",
              file=sys.stderr, flush=True)
    queue = iter(pending)
    names = gpu_names() if device == "cuda" else []  # each line names its card: a sweep can span device calls

    def worker(gpu: int | None) -> None:
        ran = 0
        while True:
            with lock:
                level_path = next(queue, None)
                if level_path is None:
                    return
                level, path = level_path
                spent = time.monotonic() - started
                if seconds is not None and ran and spent + longest[0] > seconds:  # every worker gets one problem
                    print(f"stopping{'' if gpu is None else f' GPU {gpu}'}: {spent:.0f} s spent, and the longest problem "
                          f"so far took {longest[0]:.0f} s of the {seconds:g} s; a rerun with the same --state goes on "
                          f"from the first problem without a line", file=sys.stderr, flush=True)
                    return
            where = "" if gpu is None else f" (GPU {gpu})"
            print(f"level {level} {path.stem}{where} ...", file=sys.stderr, flush=True)
            began = time.monotonic()
            line = state_line(level, path.stem, run_example(path, device=device, max_turns=max_turns, timeout=timeout,
                                                            gpu=gpu))
            line["gpu"] = _card(names, gpu)
            with lock:
                longest[0] = max(longest[0], time.monotonic() - began)
                print(f"level {level} {path.stem}{where}: {_outcome(line)}", file=sys.stderr, flush=True)
                with state.open("a") as out:
                    out.write(json.dumps(line) + "\n")
                done.append(line)
            ran += 1

    if gpus <= 1:
        worker(None)
    else:
        with ThreadPoolExecutor(gpus) as pool:
            for finished in [pool.submit(worker, gpu) for gpu in range(gpus)]:
                finished.result()
    return done


def gpu_names() -> list[str]:
    """The name of each GPU nvidia-smi lists, in its order ([] where there is none)."""
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [name.strip() for name in listed.stdout.splitlines() if name.strip()] if listed.returncode == 0 else []


def _card(names: list[str], gpu: int | None) -> str | None:
    """The card a run had: its own GPU's, or the only one there is (None: not known)."""
    if gpu is not None:
        return names[gpu] if gpu < len(names) else None
    return names[0] if len(set(names)) == 1 else None


def read_state(state: Path) -> list[Result]:
    if not state.exists():
        return []
    return [json.loads(text) for text in state.read_text().splitlines() if text.strip()]


def state_line(level: int, problem: str, result: Result) -> Result:
    """What the report needs of one run (the whole JSON of a run is large: verdicts, trajectories)."""
    reason = str(result.get("stop_reason") or "")
    return {"level": level, "problem": problem, "planned": _NOT_PLANNED not in reason, "accepted": accepted(result),
            "status": result.get("status"), "verdict": (result.get("verdict") or {}).get("status"),
            **{key: _timing(result, key) for key in _KEPT}, "memory": ((result.get("verdict") or {}).get("memory") or {}).get("mode"),
            "stop_reason": " ".join(reason.split())[:400], "wall_seconds": result.get("process_seconds"),
            "variant": submitted_variant(result), "tried": tried(result), "engine": engine_commit()}


def engine_commit() -> str | None:
    """The commit the measuring tree was at, so that a line says which engine and templates it measured: KS_ENGINE
    where the tree travelled without its .git (the GPU box's copy; builtin_session.sh passes it on), else git's
    HEAD, with "+changes" where the tree differs from it; None where neither says."""
    if os.environ.get("KS_ENGINE"):
        return os.environ["KS_ENGINE"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+changes" if dirty else "") if head else None


def tried(result: Result) -> list[dict[str, Any]]:
    """Each evaluation of the run in order: status, flags, ms and speedups (a variant that lost to the submitted one
    says here whether it was slower or not accepted, and why)."""
    keep = ("turn", "status", "flags", "candidate_ms", "speedup_vs_eager", "speedup_vs_compile")
    return [{**{k: e.get(k) for k in keep}, "message": str(e.get("message") or "")[:160]}
            for e in result.get("evaluations") or []]


def submitted_variant(result: Result) -> str | None:
    """The submitted candidate's variant, from the line the built-in policy heads its source with (which layout or
    block size won is what the next template needs to know); None where nothing was submitted."""
    first = str(result.get("best_source") or "").split("\n", 1)[0]
    head = "built-in policy ("
    return first[first.index(head) + len(head):].rsplit(")", 1)[0] if head in first else None


def _outcome(line: Result) -> str:
    if line["accepted"]:
        return f"accepted, {_num(line['speedup_vs_best'], 2, 'x')} vs best"
    return ("not planned: " if not line["planned"] else "not accepted: ") + line["stop_reason"][:200]


def run_markdown(lines: list[Result], host: str) -> str:
    """Per level: planned, accepted among the planned, geometric means over the accepted; then every problem."""
    out = ["| level | problems | planned | accepted (of planned) | geomean vs best | vs eager | vs torch.compile |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for level in sorted({r["level"] for r in lines}):
        mine = [r for r in lines if r["level"] == level]
        planned = [r for r in mine if r["planned"]]
        good = [r for r in planned if r["accepted"]]
        share = f"{len(good)} ({100 * len(good) / len(planned):.0f}%)" if planned else "0"
        means = [_num(_geomean([r[k] for r in good if r[k] is not None]), 2, "x")
                 for k in ("speedup_vs_best", "speedup_vs_eager", "speedup_vs_compile")]
        out.append(f"| {level} | {len(mine)} | {len(planned)} | {share} | {' | '.join(means)} |")
    # engine: the commit that measured the line ("—" for lines older than the field): figures from older templates
    # stand until their problem is measured again.
    out += ["", "| level | problem | outcome | vs best | vs eager | vs torch.compile | SOL | memory | s | GPU | engine |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in lines:
        sol = None if r["sol_fraction"] is None else 100 * r["sol_fraction"]
        out.append(f"| {r['level']} | {r['problem']} | {_cell(_outcome(r))} | {_num(r['speedup_vs_best'], 2, 'x')} "
                   f"| {_num(r['speedup_vs_eager'], 2, 'x')} | {_num(r['speedup_vs_compile'], 2, 'x')} "
                   f"| {_num(sol, 0, '%')} | {r['memory'] or '—'} | {_num(r['wall_seconds'], 0)} | {r.get('gpu') or '—'} "
                   f"| {r.get('engine') or '—'} |")
    return "\n".join(out) + f"\n\nmachine: {host}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernelbench", nargs="?", type=Path, default=None,
                        help="a KernelBench checkout: count the problems the policy plans instead of running examples")
    parser.add_argument("--levels", default="1,2,3", help="with a KernelBench checkout: the levels to count")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda", help="where candidates are built and timed")
    parser.add_argument("--only", default=None, help="comma-separated example names (default: every examples/*.py)")
    parser.add_argument("--max-turns", type=int, default=8, help="model turns per example")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per example before it is killed")
    parser.add_argument("--out", type=Path, default=None, help="write the raw results as JSON here")
    parser.add_argument("--prebuild", type=int, default=0, metavar="JOBS",
                        help="first compile every variant into the build cache, JOBS at once (0: no prebuild)")
    parser.add_argument("--run", action="store_true",
                        help="with a KernelBench checkout: run the policy on every problem instead of counting plans")
    parser.add_argument("--state", type=Path, default=Path("var/builtin_kernelbench.jsonl"),
                        help="with --run: one JSON line per finished problem; a rerun skips them")
    parser.add_argument("--prebuild-variants", type=int, default=None, metavar="K",
                        help="with --prebuild: only each problem's first K variants (default: all)")
    parser.add_argument("--seconds", type=float, default=None, help="with --run: start no problem that the longest so far would carry past this many seconds")
    parser.add_argument("--prebuild-window", type=int, default=24, metavar="N",
                        help="with --run and --prebuild: prebuild the variants of the next N problems without a state line")
    parser.add_argument("--gpus", type=int, default=1, metavar="N",
                        help="with --run: N problems at once, each alone on one of GPUs 0..N-1 (default 1: as inherited)")
    args = parser.parse_args(argv)
    if args.kernelbench is not None and args.run:
        args.state.parent.mkdir(parents=True, exist_ok=True)
        lines = run_kernelbench(args.kernelbench, [int(x) for x in args.levels.split(",") if x.strip()], device=args.device,
                                max_turns=args.max_turns, timeout=args.timeout, state=args.state, seconds=args.seconds,
                                prebuild_jobs=args.prebuild, prebuild_window=args.prebuild_window,
                                prebuild_first=args.prebuild_variants, gpus=args.gpus)
        report = run_markdown(lines, machine(args.device))
        if args.out:
            args.out.write_text(report)
        print(report, end="")
        return 0
    if args.kernelbench is not None:
        counted = count_planned(args.kernelbench, [int(x) for x in args.levels.split(",") if x.strip()])
        if args.out:
            args.out.write_text(json.dumps({"kernelbench": str(args.kernelbench), "results": counted}, indent=2))
        print(count_markdown(counted), end="")
        return 0
    paths = _examples(args.only)
    host = machine(args.device)
    if args.prebuild:
        print(f"prebuilt every variant in {prebuild(paths, args.device, args.prebuild, args.prebuild_variants):.1f} s", file=sys.stderr, flush=True)
    results: list[Result] = []
    for path in paths:
        print(f"{path.stem} ...", file=sys.stderr, flush=True)
        result = run_example(path, device=args.device, max_turns=args.max_turns, timeout=args.timeout)
        print(f"{path.stem}: {'accepted' if accepted(result) else result.get('stop_reason')}", file=sys.stderr, flush=True)
        results.append(result)
        if args.out:  # after every example, so a run cut short (a lease, a kill) still leaves what it measured
            _write(args.out, args, results, host)
    summary = summarise(results)
    if args.out:
        _write(args.out, args, results, host)
    print(markdown(results, summary, host), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
