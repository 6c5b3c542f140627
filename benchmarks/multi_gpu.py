"""One `gpu` worker per GPU: does a batch spread over all of them, and how much faster does it finish?

Starts its own Postgres (initdb/pg_ctl in a temporary directory; binaries from --pg-bin, PATH or
/usr/lib/postgresql/*/bin) and Redis (redis-server on a free port), migrates, makes a user, checks the
examples in as problems, then runs the same batch (the built-in policy on each example) twice, each time on
fresh workers started as README's production layout starts them:

    CUDA_VISIBLE_DEVICES=<i> celery -A studio worker -Q gpu -c 1 -n gpu<i>@%h     (one per GPU in the phase)
    celery -A studio worker -Q agent -c <agent-concurrency>                         (model turns)
    celery -A studio worker -Q build -c 2                                           (problem checks)

once with every worker (first), once with one (second; running it second gives it the warmer OS caches, so
the speedup is not flattered). Each phase gets an empty build cache (KSTUDIO_CACHE_DIR) of its own, so both
compile the same kernels. Each gpu worker records the start and end of every step it runs; a candidate's
verdict (its run's "verification" event) is counted for the worker whose step was running when it was
stored. Prints progress as it goes, a table at the end, and writes everything to --out as JSON.

Speedup = one worker's figure / all workers' figure, for the batch's wall time (submitted to every run over)
and its GPU span (first gpu step started to last gpu step ended).

Usage: python benchmarks/multi_gpu.py --device cuda --only swiglu,softmax_rows --max-turns 4 --out multi.json
       python benchmarks/multi_gpu.py --device cpu --workers 1 --only relu_scale_bias,row_sum   (a CPU box)
On the CPU, --workers N starts N gpu-queue workers with no GPU (CUDA_VISIBLE_DEVICES empty).
"""
from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(ROOT))

from benchmarks.builtin_policy import machine  # noqa: E402  (ROOT first: this file runs as a script)

GPU_STAGES = ("act", "evaluate")  # the stages the gpu queue runs (apps/runs/steps.QUEUES)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- services

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_redis(url: str, seconds: float = 60) -> None:
    import redis

    client, deadline = redis.Redis.from_url(url, socket_connect_timeout=1), time.monotonic() + seconds
    while True:
        try:
            client.ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise SystemExit(f"redis-server did not answer at {url} within {seconds:g} s") from None
            time.sleep(0.1)


def pg_bin(given: str | None) -> Path:
    if given:
        return Path(given)
    on_path = shutil.which("pg_ctl")
    if on_path and Path(on_path).with_name("initdb").exists():
        return Path(os.path.realpath(on_path)).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise SystemExit("no Postgres server binaries (initdb, pg_ctl): install Debian's postgresql package, put them "
                         "on PATH or name their directory with --pg-bin")
    return Path(found[-1]).parent


def as_db_user(argv: list[str]) -> list[str]:
    """initdb and postgres refuse root: run them as `postgres` (or `nobody` where no such user exists)."""
    if os.geteuid() != 0:
        return argv
    try:
        user = pwd.getpwnam("postgres").pw_name
    except KeyError:
        user = "nobody"
    return ["runuser", "-u", user, "--", *argv]


class Services:
    """A private Postgres and Redis in `tmp`, on free ports."""

    def __init__(self, tmp: Path, bin_dir: Path, redis_server: str) -> None:
        self.tmp, self.bin, self.redis_server = tmp, bin_dir, redis_server
        self.pg_port, self.redis_port = free_port(), free_port()
        self.redis: subprocess.Popen | None = None

    @property
    def database_url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.pg_port}/postgres"

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def start(self) -> None:
        self.tmp.chmod(0o777)  # the database user writes its data directory and socket here
        run(as_db_user([str(self.bin / "initdb"), "-D", str(self.tmp / "pg"), "-U", "postgres", "--auth=trust",
                        "--no-sync", "-E", "UTF8"]))
        run(as_db_user([str(self.bin / "pg_ctl"), "-D", str(self.tmp / "pg"), "-l", str(self.tmp / "postgres.log"),
                        "-w", "-t", "60", "-o", f"-p {self.pg_port} -k {self.tmp} -c listen_addresses=127.0.0.1 "
                        "-c fsync=off -c full_page_writes=off -c max_connections=200", "start"]))
        self.redis = subprocess.Popen([self.redis_server, "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--dir", str(self.tmp)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_for_redis(self.redis_url)
        log(f"Postgres on port {self.pg_port} ({self.bin}), Redis on port {self.redis_port}")

    def stop(self) -> None:
        if self.redis is not None and self.redis.poll() is None:
            self.redis.kill()
            self.redis.wait()
        subprocess.run(as_db_user([str(self.bin / "pg_ctl"), "-D", str(self.tmp / "pg"), "-m", "immediate", "-w", "stop"]),
                       check=False, capture_output=True)


def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}")
    return done


# -------------------------------------------------------------------------------------------- workers

def worker_shim(steps_file: str, celery_args: list[str]) -> None:
    """A Celery worker (README's command line) that also appends one JSON line per step it runs to
    `steps_file`: run, stage, its start and end (epoch seconds) and this worker's CUDA_VISIBLE_DEVICES."""
    from celery.signals import task_postrun, task_prerun

    from studio.celery import app

    started: dict[str, float] = {}

    @task_prerun.connect
    def _start(task_id: str = "", **kwargs: Any) -> None:
        started[task_id] = time.time()

    @task_postrun.connect
    def _end(task_id: str = "", task: Any = None, args: Any = None, state: str = "", **kwargs: Any) -> None:
        if getattr(task, "name", "") != "apps.runs.tasks.run_step" or not args:
            return
        line = {"run": args[0], "stage": args[1], "start": started.pop(task_id, None), "end": time.time(),
                "state": state, "gpu": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid()}
        with open(steps_file, "a") as f:
            f.write(json.dumps(line) + "\n")

    app.worker_main(["worker", *celery_args])


class Worker:
    def __init__(self, name: str, queue: str, concurrency: int, env: dict[str, str], folder: Path) -> None:
        self.name, self.log, self.steps = name, folder / f"{name}.log", folder / f"{name}.steps.jsonl"
        self.gpu = env.get("CUDA_VISIBLE_DEVICES")
        argv = [sys.executable, str(Path(__file__).resolve()), "worker", "--steps", str(self.steps), "--",
                "-Q", queue, "-c", str(concurrency), "-n", f"{name}@%h", "-l", "info"]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise SystemExit(f"worker {self.name} exited with {self.proc.returncode}: {self.log.read_text()[-3000:]}")
        return " ready." in self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:  # what it left behind (the sandbox's processes are in its session)
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def step_lines(self) -> list[dict[str, Any]]:
        if not self.steps.exists():
            return []
        return [json.loads(line) for line in self.steps.read_text().splitlines() if line.strip()]


def start_workers(phase: str, gpus: list[str], env: dict[str, str], folder: Path, agent_concurrency: int) -> list[Worker]:
    folder.mkdir(parents=True, exist_ok=True)
    workers = [Worker(f"{phase}-build", "build", 2, env, folder),
               Worker(f"{phase}-agent", "agent", agent_concurrency, env, folder)]
    for i, gpu in enumerate(gpus):
        workers.append(Worker(f"{phase}-gpu{i}", "gpu", 1, {**env, "CUDA_VISIBLE_DEVICES": gpu}, folder))
    deadline = time.monotonic() + 180
    while not all(w.ready() for w in workers):
        if time.monotonic() > deadline:
            raise SystemExit(f"workers not ready within 180 s: {[w.name for w in workers if not w.ready()]}")
        time.sleep(0.5)
    log(f"{phase}: {len(workers)} workers ready ({', '.join(f'{w.name} CUDA_VISIBLE_DEVICES={w.gpu!r}' for w in workers if w.gpu is not None)})")
    return workers


# -------------------------------------------------------------------------------------------- the studio

def setup_django(env: dict[str, str]) -> None:
    os.environ.update(env)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    import django

    django.setup()


def make_problems(names: list[str]) -> tuple[Any, list[Any]]:
    from django.contrib.auth import get_user_model

    from apps.problems.services import create_problem

    user, _ = get_user_model().objects.get_or_create(username="multigpu")
    problems = []
    for name in names:
        started = time.monotonic()
        problems.append(create_problem(user, f"{name}.py", (EXAMPLES / f"{name}.py").read_text()))
        log(f"problem {name} checked in ({time.monotonic() - started:.1f} s)")
    return user, problems


def run_batch(phase: str, user: Any, problems: list[Any], device: str, max_turns: int, timeout: float) -> dict[str, Any]:
    from apps.batches.models import Batch
    from apps.batches.services import RunConfig, cancel_batch, progress, report, start_batch
    from apps.endpoints.models import ModelEndpoint

    endpoint = ModelEndpoint.objects.get(kind="builtin")
    submitted = time.time()
    batch = start_batch(user, problems, RunConfig(endpoint=endpoint, budgets={"turns": max_turns}, device=device),
                        name=f"multi-gpu {phase}")
    log(f"{phase}: batch {batch.pk} submitted ({len(problems)} problems, device {device}, up to {max_turns} turns each)")
    shown, timed_out = None, False
    while True:
        batch = Batch.objects.get(pk=batch.pk)
        state = progress(batch)
        counts = {k: v for k, v in state["counts"].items() if v}
        if (state["done"], counts) != shown:
            shown = (state["done"], counts)
            log(f"{phase}: {time.time() - submitted:6.1f} s  {state['done']}/{state['total']} runs over  {counts}")
        if state["done"] == state["total"]:
            break
        if time.time() - submitted > timeout:
            timed_out = True
            log(f"{phase}: not over after {timeout:g} s: cancelling the batch")
            cancel_batch(batch)
            break
        time.sleep(1)
    finished = time.time()
    return {"batch": batch.pk, "submitted": submitted, "wall_seconds": finished - submitted, "timed_out": timed_out,
            "report": report(Batch.objects.get(pk=batch.pk))}


def verifications(batch_id: int) -> list[dict[str, Any]]:
    from apps.runs.models import Event

    events = Event.objects.filter(run__batch_item__batch_id=batch_id, kind="verification")
    return [{"run": e.run_id, "status": e.payload.get("status"), "at": e.created_at.timestamp()} for e in events]


def attribute(steps: dict[str, list[dict[str, Any]]], verdicts: list[dict[str, Any]]) -> tuple[dict[str, Counter], int]:
    """Each verdict counted for the gpu worker whose step on its run was running when it was stored."""
    per_worker: dict[str, Counter] = {name: Counter() for name in steps}
    unattributed = 0
    for verdict in verdicts:
        owner = next((name for name, lines in steps.items() for s in lines
                      if s["run"] == verdict["run"] and s["start"] is not None
                      and s["start"] - 0.5 <= verdict["at"] <= s["end"] + 0.5), None)
        if owner is None:
            unattributed += 1
        else:
            per_worker[owner][verdict["status"]] += 1
    return per_worker, unattributed


def phase_result(phase: str, gpus: list[str], workers: list[Worker], batch: dict[str, Any]) -> dict[str, Any]:
    gpu_workers = [w for w in workers if "-gpu" in w.name]
    steps = {w.name: [s for s in w.step_lines() if s["stage"] in GPU_STAGES] for w in gpu_workers}
    per_worker, unattributed = attribute(steps, verifications(batch["batch"]))
    every = [s for lines in steps.values() for s in lines if s["start"] is not None]
    span = (max(s["end"] for s in every) - min(s["start"] for s in every)) if every else None
    per_gpu = {}
    for w in gpu_workers:
        lines = [s for s in steps[w.name] if s["start"] is not None]
        per_gpu[w.name] = {"CUDA_VISIBLE_DEVICES": w.gpu, "steps": len(lines),
                           "busy_seconds": round(sum(s["end"] - s["start"] for s in lines), 2),
                           "verdicts": dict(per_worker[w.name])}
    summary = batch["report"]["summary"]
    return {"phase": phase, "workers": len(gpus), "gpus": gpus, "batch": batch["batch"],
            "wall_seconds": round(batch["wall_seconds"], 2), "gpu_span_seconds": round(span, 2) if span else None,
            "timed_out": batch["timed_out"], "per_gpu": per_gpu, "unattributed_verdicts": unattributed,
            "summary": summary, "rows": [{k: r[k] for k in ("problem", "run_status", "verdict", "correct", "speedup_vs_eager")}
                                         for r in batch["report"]["rows"]]}


# ------------------------------------------------------------------------------------------------ main

def visible_gpus(device: str, workers: int | None) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value of each gpu worker: one per GPU this process may use."""
    if device == "cpu":
        return [""] * (workers or 1)
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        gpus = [g.strip() for g in given.split(",") if g.strip()]
    else:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                                text=True, check=False).stdout.split()
        gpus = [g for g in listed if g.isdigit()]
    if not gpus:
        raise SystemExit("no GPU visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES is empty): use --device cpu")
    return gpus[:workers] if workers else gpus


def studio_env(services: Services, device: str, cache: Path, args: argparse.Namespace) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "CUDA_VISIBLE_DEVICES")}
    env.update(DATABASE_URL=services.database_url, REDIS_URL=services.redis_url, KSTUDIO_DEVICE=device,
               KSTUDIO_CACHE_DIR=str(cache), KSTUDIO_COMPILE_BASELINE=str(args.compile_baseline).lower(),
               DJANGO_SETTINGS_MODULE="studio.settings", PYTHONPATH=str(ROOT))
    if args.iterations:
        env["KSTUDIO_EVAL_MIN_ROUNDS"] = str(args.iterations)
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the parent, the build and the agent workers: no GPU either
    return env


def table(result: dict[str, Any]) -> str:
    lines = ["| phase | workers | wall s | GPU span s | correct | per worker: steps, busy s, verdicts |",
             "| --- | --- | --- | --- | --- | --- |"]
    for p in result["phases"]:
        cells = "; ".join(f"{name} (CUDA_VISIBLE_DEVICES={g['CUDA_VISIBLE_DEVICES']!r}): {g['steps']} steps, "
                          f"{g['busy_seconds']:.1f} s, {dict(sorted(g['verdicts'].items()))}" for name, g in p["per_gpu"].items())
        lines.append(f"| {p['phase']} | {p['workers']} | {p['wall_seconds']:.1f}{' (timed out)' if p['timed_out'] else ''} "
                     f"| {p['gpu_span_seconds'] or 0:.1f} | {p['summary']['correct']}/{p['summary']['problems']} | {cells} |")
    s = result["speedup"]
    lines += ["", f"speedup of {result['phases'][0]['workers']} workers over 1: wall {s['wall']:.2f}x, GPU span "
              f"{s['gpu_span']:.2f}x" if s["wall"] and s["gpu_span"] else "speedup: not measured (a phase has no figure)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["worker"]:
        rest = argv[1:]
        split = rest.index("--")
        worker_shim(rest[rest.index("--steps") + 1], rest[split + 1:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--workers", type=int, help="gpu workers in the big phase (cuda: default one per visible GPU, "
                        "at most that; cpu: default 1)")
    parser.add_argument("--only", help="comma-separated example names (default: every examples/*.py)")
    parser.add_argument("--max-turns", type=int, default=4, help="the agent's turn budget per problem")
    parser.add_argument("--iterations", type=int, help="KSTUDIO_EVAL_MIN_ROUNDS (default: the studio's, 5)")
    parser.add_argument("--no-compile-baseline", dest="compile_baseline", action="store_false",
                        help="do not time torch.compile (KSTUDIO_COMPILE_BASELINE=false)")
    parser.add_argument("--agent-concurrency", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per phase before its batch is cancelled")
    parser.add_argument("--pg-bin", help="directory of initdb and pg_ctl")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--out", default="multi_gpu.json", help="the JSON result")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, databases)")
    args = parser.parse_args(argv)

    names = sorted(p.stem for p in EXAMPLES.glob("*.py")) if not args.only else [n.strip() for n in args.only.split(",")]
    missing = [n for n in names if not (EXAMPLES / f"{n}.py").exists()]
    if missing:
        raise SystemExit(f"no such example: {', '.join(missing)} (see examples/)")
    gpus = visible_gpus(args.device, args.workers)
    phases = [("all", gpus), ("one", gpus[:1])]
    tmp = Path(tempfile.mkdtemp(prefix="kstudio-multigpu-"))
    services = Services(tmp, pg_bin(args.pg_bin), args.redis_server)
    result: dict[str, Any] = {"machine": machine(args.device), "device": args.device, "examples": names,
                              "max_turns": args.max_turns, "compile_baseline": args.compile_baseline,
                              "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "phases": []}
    workers: list[Worker] = []
    try:
        services.start()
        setup_env = studio_env(services, args.device, tmp / "cache-setup", args)
        run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=setup_env, timeout=600)
        log("migrated")
        setup_django(setup_env)
        workers = start_workers("setup", [], setup_env, tmp / "setup", 1)
        user, problems = make_problems(names)
        for w in workers:
            w.stop()
        for phase, phase_gpus in phases:
            env = studio_env(services, args.device, tmp / f"cache-{phase}", args)
            workers = start_workers(phase, phase_gpus, env, tmp / phase, args.agent_concurrency)
            batch = run_batch(phase, user, problems, args.device, args.max_turns, args.timeout)
            for w in workers:
                w.stop()
            outcome = phase_result(phase, phase_gpus, workers, batch)
            result["phases"].append(outcome)
            log(f"{phase}: {outcome['wall_seconds']:.1f} s wall, GPU span {outcome['gpu_span_seconds']} s, "
                f"per worker {json.dumps(outcome['per_gpu'])}")
            workers = []
        big, one = result["phases"]
        result["speedup"] = {
            "wall": one["wall_seconds"] / big["wall_seconds"] if big["wall_seconds"] else None,
            "gpu_span": (one["gpu_span_seconds"] / big["gpu_span_seconds"]
                         if one["gpu_span_seconds"] and big["gpu_span_seconds"] else None)}
    finally:
        for w in workers:
            w.stop()
        services.stop()
        result["workdir"] = str(tmp) if args.keep else None
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        Path(args.out).write_text(json.dumps(result, indent=2, default=str))
        log(f"wrote {args.out}")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
