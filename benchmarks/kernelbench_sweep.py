"""KernelBench levels 1-3 through the product, end to end: `manage.py import_kernelbench` each level, then an
evaluation over the REST API of every problem with the problem's own code as its candidate (`ModelNew = Model`),
correctness checked and timed at KernelBench's own sizes. Each problem should end accepted at about 1.0x, or with
a capacity verdict that states its footprint (agent/engine/evaluate/memory.py); anything else is a finding, with its reason.

A problem's own PyTorch code calls PyTorch ops, which the op allow-list refuses in a candidate: the studio's workers
must run with KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP=1 for this sanity sweep, and only for it (the script refuses to start
without --allow-any-op-sanity, which says you did). Batches (apps/batches) run the agent; a sweep of fixed candidates
is one evaluate run per problem through POST /api/v1/runs/, submitted a few at a time.

Resumable: every finished problem is a line of the state file (JSON lines); a rerun skips them, and picks up a run
that was submitted but not finished. The report (per level: evaluated, capacity, other with reasons; the sweep's
wall time) is written at the end of every pass.

    python benchmarks/kernelbench_sweep.py --kernelbench /tmp/KernelBench --url http://127.0.0.1:8000 \\
        --token TOKEN --owner sweep --allow-any-op-sanity --state var/sweep.jsonl --report var/sweep_report.json
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
TERMINAL = ("finished", "failed", "cancelled")


class Api:
    def __init__(self, url: str, token: str) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/") + "/api/v1", timeout=120.0,
                                 headers={"Authorization": f"Token {token}"})

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(path, json=body)


def candidate_source(problem_source: str) -> str:
    """The problem's own module as its candidate: its Model under the name a candidate must define."""
    return problem_source.rstrip() + "\n\n\n# The sanity sweep's candidate: the problem's own code.\nModelNew = Model\n"


def import_levels(kernelbench: Path, owner: str, levels: list[int], limit: int | None, in_process: bool) -> None:
    for level in levels:
        command = [sys.executable, "manage.py", "import_kernelbench", str(kernelbench), "--owner", owner,
                   "--level", str(level)]
        if limit:
            command += ["--limit", str(limit)]
        if in_process:
            command.append("--in-process")
        print("$", " ".join(command), flush=True)
        subprocess.run(command, cwd=ROOT, check=True)


def problems(api: Api, levels: list[int]) -> list[dict[str, Any]]:
    """The owner's imported KernelBench problems of these levels ("level1/19_ReLU"), in KernelBench's order."""
    found, page = [], 1
    while True:
        data = api.get("/problems/", mine=1, page=page)
        rows = data["results"] if isinstance(data, dict) else data
        found += [p for p in rows if p["name"].split("/", 1)[0] in {f"level{n}" for n in levels}]
        if not isinstance(data, dict) or not data.get("next"):
            break
        page += 1

    def order(p: dict[str, Any]) -> tuple[int, int, str]:
        level, _, file = p["name"].partition("/")
        head = file.split("_", 1)[0]
        return int(level[5:]), int(head) if head.isdigit() else 1 << 30, file

    return sorted({p["name"]: p for p in found}.values(), key=order)


def level_folder(kernelbench: Path, level: int) -> Path | None:
    """A level's folder in a KernelBench checkout, or in its KernelBench/ folder itself; None where neither has it."""
    return next((d for d in (kernelbench / "KernelBench" / f"level{level}", kernelbench / f"level{level}") if d.is_dir()),
                None)


def kernelbench_names(kernelbench: Path, levels: list[int], limit: int | None) -> list[str]:
    """The problem names ("level1/19_ReLU") the import was given: every file of these levels, in the import's order."""
    names = []
    for level in levels:
        folder = level_folder(kernelbench, level)
        files = sorted(folder.glob("*.py"), key=lambda f: (int(f.name.split("_", 1)[0]) if f.name.split("_", 1)[0]
                                                          .isdigit() else 1 << 30, f.name)) if folder else []
        names += [f"level{level}/{f.stem}" for f in files[:limit] if f.name != "__init__.py"]
    return names


SKIPPED = re.compile(r"skipped (level\d+/.+?)\.py: (.*)")


def not_imported(expected: list[str], imported: set[str], logs: list[Path]) -> dict[str, str]:
    """The files the import skipped, each with the reason its log gives (`manage.py import_kernelbench` writes
    "skipped level1/x.py: why"); a problem that is not there is counted as "other", never left out of the sweep."""
    reasons: dict[str, str] = {}
    for log in logs:
        for line in log.read_text(errors="replace").splitlines() if log.is_file() else []:
            found = SKIPPED.search(line)
            if found:
                reasons[found.group(1)] = found.group(2).strip()
    return {name: reasons.get(name, "not among the imported problems (no reason in the import logs)")
            for name in expected if name not in imported}


def load_state(path: Path) -> dict[str, dict[str, Any]]:
    """The last record of each problem in the state file."""
    state: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                state[record["name"]] = record
    return state


def outcome(api: Api, run_id: int) -> dict[str, Any] | None:
    """A finished run's verdict as the sweep records it; None while it runs."""
    run = api.get(f"/runs/{run_id}/")
    if run["status"] not in TERMINAL:
        return None
    verdict: dict[str, Any] = {}
    after = 0
    while True:
        page = api.get(f"/runs/{run_id}/events/", after=after)
        for event in page["events"]:
            if event["kind"] == "verification":
                verdict.update({k: event["payload"].get(k) for k in ("status", "stage", "message")})
                verdict["flags"] = [f.get("flag") for f in event["payload"].get("flags") or []]
            elif event["kind"] == "timing":
                verdict.update({k: event["payload"].get(k) for k in ("candidate_ms", "speedup_vs_eager",
                                                                     "speedup_vs_best", "sol_fraction")})
        after = page["next_after"]
        if not page["has_more"]:
            break
    return {"run_status": run["status"], "run_message": run["message"][:2000], **verdict}


def category(record: dict[str, Any]) -> str:
    """evaluated (accepted), capacity (the engine's stated limit) or other."""
    if record.get("status") == "accepted":
        return "evaluated"
    if record.get("status") == "capacity":
        return "capacity"
    return "other"


def swept(record: dict[str, Any] | None) -> bool:
    """Whether the problem has an end the sweep keeps: a file the import skipped is tried again once imported."""
    return record is not None and judged(record) and record.get("status") != "not_imported"


def judged(record: dict[str, Any]) -> bool:
    """Whether the record has an end: a verdict, a refusal, or a run that ended without one (a failure inside the
    studio, counted as "other" with the run's message)."""
    return "status" in record or record.get("run_status") in TERMINAL


def report(state: dict[str, dict[str, Any]], levels: list[int], seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {"levels": {}, "sweep_seconds": seconds}
    for level in levels:
        records = [r for r in state.values() if r["name"].startswith(f"level{level}/") and judged(r)]
        counts = Counter(category(r) for r in records)
        accepted = [r for r in records if category(r) == "evaluated"]
        out["levels"][f"level{level}"] = {
            "problems": len(records), "evaluated": counts["evaluated"], "capacity": counts["capacity"],
            "other": counts["other"],
            "capacity_reasons": {r["name"]: (r.get("message") or "")[:400] for r in records if category(r) == "capacity"},
            "other_reasons": {r["name"]: f"{r.get('status') or r.get('run_status')}: {(r.get('message') or r.get('run_message') or '')[:400]}"
                              for r in records if category(r) == "other"},
            "speedups_vs_best": {r["name"]: r.get("speedup_vs_best") for r in accepted},
            "vs_eager": against_eager(accepted),
        }
    return out


# The problem's own code against itself: a sanity sweep's speedups vs eager should lie in this band.
BAND = (0.9, 1.1)


def against_eager(accepted: list[dict[str, Any]]) -> dict[str, Any]:
    """How far the problems' own code, timed as a candidate, lies from eager (the same code): the geometric mean, how
    many lie inside BAND, and each one outside it with its figure and flags (a finding about the measurement)."""
    timed = [r for r in accepted if r.get("speedup_vs_eager")]
    outside = {r["name"]: {"speedup": float(r["speedup_vs_eager"]), "flags": sorted(set(r.get("flags") or []))}
               for r in timed if not BAND[0] <= float(r["speedup_vs_eager"]) <= BAND[1]}
    geomean = math.exp(sum(math.log(float(r["speedup_vs_eager"])) for r in timed) / len(timed)) if timed else None
    return {"geomean": geomean, "band": list(BAND), "inside": len(timed) - len(outside), "outside": outside}


def markdown(state: dict[str, dict[str, Any]], levels: list[int]) -> str:
    """The per-level counts and a row per problem with an end, as docs/benchmarks.md §16 records them."""
    counts = report(state, levels, 0.0)["levels"]
    lines = [f"| level | with an end | evaluated (accepted) | capacity | other | vs eager: geomean | inside "
             f"{BAND[0]:.1f}-{BAND[1]:.1f}x |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for n, c in counts.items():
        geomean = c["vs_eager"]["geomean"]
        lines.append(f"| {n[5:]} | {c['problems']} | {c['evaluated']} | {c['capacity']} | {c['other']} | "
                     f"{f'{geomean:.3f}x' if geomean else ''} | {c['vs_eager']['inside']} |")
    lines += ["", "| problem | outcome | vs eager | vs best | SOL |", "| --- | --- | --- | --- | --- |"]

    def figure(value: Any, unit: str) -> str:
        return f"{value * 100:.0f}%" if unit == "%" and value is not None else f"{value:.2f}x" if value else ""

    for name in [n for n in state if judged(state[n]) and int(n.split("/")[0][5:]) in levels]:
        r = state[name]
        why = "" if category(r) == "evaluated" else f": {(r.get('message') or r.get('run_message') or '')[:160]}"
        lines.append(f"| {name} | {category(r)}{why} | {figure(r.get('speedup_vs_eager'), 'x')} | "
                     f"{figure(r.get('speedup_vs_best'), 'x')} | {figure(r.get('sol_fraction'), '%')} |")
    return "\n".join(lines) + "\n"


def sweep(api: Api, todo: list[dict[str, Any]], state: dict[str, dict[str, Any]], state_path: Path, parallel: int,
          poll: float) -> None:
    """Submit up to `parallel` evaluations at a time; record each as it finishes."""
    waiting = {r["run_id"]: r for r in state.values() if r.get("run_id") and not judged(r) and _still_there(api, r)}
    # A file the import skipped before (not_imported) and imported since is swept like any other.
    waited = {r["name"] for r in waiting.values()}
    pending = [p for p in todo if not swept(state.get(p["name"])) and p["name"] not in waited]
    while pending or waiting:
        while pending and len(waiting) < parallel:
            problem = pending[0]
            response = api.post("/runs/", {"problem": problem["id"], "kind": "evaluate",
                                           "source": candidate_source(problem["source"])})
            if response.status_code in (429, 503) or (response.status_code == 400 and "quota" in response.text.lower()):
                break  # the studio's quota or queue: try again once something finished
            pending.pop(0)
            record = {"name": problem["name"], "problem_id": problem["id"]}
            if response.status_code != 201:
                record.update(status="not_submitted", message=response.text[:1000])
            else:
                record["run_id"] = response.json()["id"]
                waiting[record["run_id"]] = record
            _append(state_path, record)
            state[record["name"]] = record
        time.sleep(poll)
        for run_id, record in list(waiting.items()):
            done = outcome(api, run_id)
            if done is not None:
                record.update(done)
                _append(state_path, record)
                state[record["name"]] = record
                del waiting[run_id]
                print(f"{record['name']}: {category(record)} ({record.get('status') or record.get('run_status')}"
                      + (f", {record['speedup_vs_best']:.2f}x vs best" if record.get("speedup_vs_best") else "") + ")",
                      flush=True)


def _still_there(api: Api, record: dict[str, Any]) -> bool:
    """Whether the run a record waits on is this studio's run of that problem. A sweep resumed against another
    studio database (a fresh machine: only the state file is kept, benchmarks/results/kernelbench_sweep/) has no
    such run, or one of another problem under that id: the problem is submitted again."""
    response = api.http.get(f"/runs/{record['run_id']}/")
    if response.status_code == 404:
        return False
    response.raise_for_status()
    return response.json().get("problem_name") == record["name"]


def _append(path: Path, record: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")


def pending(kernelbench: Path, state: dict[str, dict[str, Any]], levels: list[int], out: Path) -> int:
    """A KernelBench-shaped folder (out/levelN/) of links to the files of these levels that have no end in the state:
    what a fresh box must import and sweep to go on (the others' verdicts are in the state already). Returns how many."""
    count = 0
    for level in levels:
        folder, source = out / f"level{level}", level_folder(kernelbench, level)
        folder.mkdir(parents=True, exist_ok=True)
        for name in kernelbench_names(kernelbench, [level], None):
            if not swept(state.get(name)):
                file = f"{name.split('/', 1)[1]}.py"
                (folder / file).symlink_to((source / file).resolve())
                count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernelbench", type=Path, required=True, help="a KernelBench checkout (never fetched here)")
    parser.add_argument("--url", required=True, help="the studio's base URL")
    parser.add_argument("--token", default=os.environ.get("KSTUDIO_TOKEN"), help="API token (or KSTUDIO_TOKEN)")
    parser.add_argument("--owner", required=True, help="the user the problems are imported for (the token's)")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--limit", type=int, default=None, help="at most this many problems per level (a dry run)")
    parser.add_argument("--skip-import", action="store_true", help="the problems are imported already")
    parser.add_argument("--import-in-process", action="store_true",
                        help="check each imported file in this machine's sandbox, not on a build worker")
    parser.add_argument("--parallel", type=int, default=2, help="evaluations queued at once")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between polls")
    parser.add_argument("--state", type=Path, default=ROOT / "var" / "kernelbench_sweep.jsonl")
    parser.add_argument("--report", type=Path, default=ROOT / "var" / "kernelbench_sweep_report.json")
    parser.add_argument("--import-log", type=Path, nargs="*", default=[],
                        help="the import's logs, for the reason each skipped file gives (default: none)")
    parser.add_argument("--allow-any-op-sanity", action="store_true",
                        help="say that the studio's workers run with KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP=1 (sanity sweeps only)")
    args = parser.parse_args(argv)
    if not args.allow_any_op_sanity:
        parser.error("start the studio's workers with KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP=1 for this sanity sweep (and only "
                     "for it), then pass --allow-any-op-sanity")
    if not args.token:
        parser.error("give --token (or set KSTUDIO_TOKEN)")
    started = time.monotonic()
    if not args.skip_import:
        import_levels(args.kernelbench, args.owner, args.levels, args.limit, args.import_in_process)
    api = Api(args.url, args.token)
    todo = problems(api, args.levels)
    if args.limit:
        todo = [p for level in args.levels for p in [q for q in todo if q["name"].startswith(f"level{level}/")][:args.limit]]
    args.state.parent.mkdir(parents=True, exist_ok=True)
    state = load_state(args.state)
    names = {p["name"] for p in todo}
    for name, why in not_imported(kernelbench_names(args.kernelbench, args.levels, args.limit), names,
                                  args.import_log).items():
        if state.get(name, {}).get("message") != why:
            state[name] = {"name": name, "status": "not_imported", "message": why}
            _append(args.state, state[name])
    # The wall time of earlier passes (a resumed sweep adds its own).
    previous = float(json.loads(args.report.read_text()).get("sweep_seconds", 0.0)) if args.report.exists() else 0.0
    sweep(api, todo, state, args.state, args.parallel, args.poll)
    result = report(state, args.levels, previous + time.monotonic() - started)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(result, indent=2))
    for level, counts in result["levels"].items():
        print(f"{level}: {counts['problems']} problems, {counts['evaluated']} evaluated, {counts['capacity']} capacity, "
              f"{counts['other']} other")
    print(f"sweep wall time so far: {result['sweep_seconds']:.0f} s; report: {args.report}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["markdown"]:  # python benchmarks/kernelbench_sweep.py markdown STATE [LEVEL ...]
        print(markdown(load_state(Path(sys.argv[2])), [int(n) for n in sys.argv[3:]] or [1, 2, 3]), end="")
        sys.exit(0)
    if sys.argv[1:2] == ["pending"]:  # python benchmarks/kernelbench_sweep.py pending KERNELBENCH STATE OUT [LEVEL ...]
        print(pending(Path(sys.argv[2]), load_state(Path(sys.argv[3])), [int(n) for n in sys.argv[5:]] or [1, 2, 3],
                      Path(sys.argv[4])))
        sys.exit(0)
    sys.exit(main())
