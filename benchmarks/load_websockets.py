"""Websocket fan-out under load: many browsers watch one run while a producer appends events at a fixed rate
through the real event path (apps.runs.events.append_event: numbered and stored under the run's row lock in
Postgres, then pushed through channels-redis to daphne's consumers). Every client checks that it received every
seq exactly once and in order; delivery latency runs from just before append_event to the client's receipt
(one machine, one clock).

Usage (Postgres and Redis required; the database is migrated first):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kstudio_bench REDIS_URL=redis://127.0.0.1:6379/8 \\
        .venv/bin/python -m benchmarks.load_websockets --clients 200 --rate 50 --seconds 60
The producer runs as its own process (`... load_websockets produce --run ID`), so the clients' event loop and
the producer do not share an interpreter.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import live_studio

END = "bench_end"  # the producer's last event: a client that sees it has seen everything before it


@dataclass
class Watched:
    """What one client received: the seqs in arrival order and each event's latency in seconds."""

    seqs: list[int] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    error: str = ""


async def _connect(url: str, run_id: int, cookie: str) -> Any:
    from websockets.asyncio.client import connect

    ws_url = url.replace("http://", "ws://") + f"/ws/runs/{run_id}/?after=0"
    # No pings (a loaded 2-core box may answer late and the library would close the socket) and no compression
    # (a browser's default is on, but it costs both ends CPU that this measurement would then be about).
    return await connect(ws_url, origin=url, additional_headers={"Cookie": f"sessionid={cookie}"}, open_timeout=120,
                         ping_interval=None, compression=None, max_queue=None)


async def _receive(ws: Any, idle_seconds: float) -> Watched:
    seen = Watched()
    try:
        while True:
            raw = await asyncio.wait_for(ws.recv(), timeout=idle_seconds)
            now = time.time()
            event = json.loads(raw)
            seen.seqs.append(event["seq"])
            if "t" in event["payload"]:
                seen.latencies.append(now - event["payload"]["t"])
            if event["kind"] == END:
                return seen
    except Exception as exc:  # noqa: BLE001 - a client's failure is a finding of the benchmark, not a crash of it
        seen.error = f"{type(exc).__name__}: {exc}"
        return seen
    finally:
        await ws.close()


async def _fan_out(url: str, run_id: int, cookie: str, clients: int, rate: float, seconds: float,
                   producer_env: dict[str, str]) -> tuple[list[Watched], dict[str, Any], float]:
    started = time.monotonic()
    # Connect in waves: a storm of 200 handshakes at once measures the accept queue, not the fan-out.
    sockets = []
    for first in range(0, clients, 25):
        sockets += await asyncio.gather(*[_connect(url, run_id, cookie) for _ in range(first, min(clients, first + 25))])
    connect_seconds = time.monotonic() - started
    receivers = [asyncio.create_task(_receive(ws, idle_seconds=max(60.0, seconds))) for ws in sockets]
    producer = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.load_websockets", "produce", "--run", str(run_id), "--rate", str(rate),
        "--seconds", str(seconds), cwd=live_studio.ROOT, env=producer_env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await producer.communicate()
    if producer.returncode != 0:
        for task in receivers:
            task.cancel()
        raise RuntimeError(f"the producer failed ({producer.returncode}): {err.decode()[-2000:]}")
    produced = json.loads(out.decode().strip().splitlines()[-1])
    return list(await asyncio.gather(*receivers)), produced, connect_seconds


def measure(url: str, run_id: int, cookie: str, *, clients: int, rate: float, seconds: float,
            producer_env: dict[str, str]) -> dict[str, Any]:
    """Connect the clients to a run with no events yet, produce, and report loss, duplicates and latency."""
    watched, produced, connect_seconds = asyncio.run(
        _fan_out(url, run_id, cookie, clients, rate, seconds, producer_env))
    expected = list(range(1, produced["events"] + 1))
    latencies = sorted(lat for w in watched for lat in w.latencies)
    return {
        "clients": clients, "events": produced["events"], "producer_rate": produced["rate"],
        "producer_seconds": produced["seconds"], "connect_seconds": round(connect_seconds, 2),
        "deliveries": sum(len(w.seqs) for w in watched), "expected_deliveries": clients * len(expected),
        "clients_with_loss": sum(1 for w in watched if set(expected) - set(w.seqs)),
        "lost": sum(len(set(expected) - set(w.seqs)) for w in watched),
        "duplicated": sum(len(w.seqs) - len(set(w.seqs)) for w in watched),
        "out_of_order": sum(1 for w in watched if w.seqs != sorted(w.seqs)),
        "errors": sorted({w.error for w in watched if w.error}),
        "latency_ms": _percentiles(latencies),
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": round(1000 * ordered[-1], 1),
            "mean": round(1000 * statistics.fmean(ordered), 1)}


def produce(run_id: int, rate: float, seconds: float) -> dict[str, Any]:
    """Append rate x seconds events to the run at an even pace, then the end marker."""
    from apps.runs.events import append_event

    count = int(rate * seconds)
    start = time.monotonic()
    most_behind = 0.0
    for i in range(count):
        due = start + i / rate
        lag = time.monotonic() - due
        if lag < 0:
            time.sleep(-lag)
        most_behind = max(most_behind, lag)
        append_event(run_id, "bench", {"i": i, "t": time.time()})
    append_event(run_id, END, {"count": count, "t": time.time()})
    elapsed = time.monotonic() - start
    return {"events": count + 1, "seconds": round(elapsed, 2), "rate": round(count / elapsed, 1),
            "most_behind_ms": round(1000 * most_behind, 1)}


def fresh_run(user) -> int:
    """A run with no events, on a benchmark problem (the fan-out does not look at the problem's code)."""
    from apps.problems.models import Problem
    from apps.runs.models import Run

    problem, _ = Problem.objects.get_or_create(owner=user, name="bench.py",
                                               defaults={"source": "# load benchmark\n", "source_hash": "bench"})
    return Run.objects.create(problem=problem, owner=user, status=Run.Status.RUNNING).pk


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="fanout", choices=["fanout", "produce"])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--rate", type=float, default=50.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--run", type=int, help="produce: the run to append to")
    args = parser.parse_args(argv)
    if args.mode == "produce":
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
        import django

        django.setup()
        print(json.dumps(produce(args.run, args.rate, args.seconds)))
        return
    live_studio.setup_django()
    user = live_studio.bench_user()
    run_id = fresh_run(user)
    log = Path(tempfile.mkdtemp(prefix="load_ws_")) / "daphne.log"
    url, daphne = live_studio.start_daphne(dict(os.environ), log)
    try:
        report = measure(url, run_id, live_studio.session_cookie(user), clients=args.clients, rate=args.rate,
                         seconds=args.seconds, producer_env=dict(os.environ))
    finally:
        live_studio.stop(daphne)
    report["machine"] = live_studio.machine()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
