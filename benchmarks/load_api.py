"""The API's list endpoints under concurrent clients: requests per second and latency percentiles per endpoint.

A benchmark user owns --items problems, runs (each with an accepted candidate) and kernels, and another user as
many private ones (so every list really filters by visibility); --concurrency clients with the user's token then
request the list endpoints round-robin for --seconds against daphne (throttling raised out of the way).

Usage (Postgres and Redis required; the database is migrated first):
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/kstudio_bench REDIS_URL=redis://127.0.0.1:6379/8 \\
        .venv/bin/python -m benchmarks.load_api --concurrency 20 --seconds 30
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks import live_studio
from benchmarks.load_websockets import _percentiles

ENDPOINTS = ["/api/v1/problems/", "/api/v1/runs/", "/api/v1/kernels/", "/api/v1/batches/", "/api/v1/endpoints/"]


def seed(user, items: int) -> None:
    """items problems, runs with an accepted candidate and kernels for the user (created once, reused)."""
    from django.utils import timezone

    from apps.kernels.models import Kernel
    from apps.problems.models import Problem
    from apps.runs.models import Candidate, Run

    have = Problem.objects.filter(owner=user, name__startswith="load_").count()
    for i in range(have, items):
        problem = Problem.objects.create(owner=user, name=f"load_{i}.py", source="# load benchmark\n", source_hash=f"load{i}")
        run = Run.objects.create(problem=problem, owner=user, status=Run.Status.FINISHED)
        verdict = {"status": "accepted", "timing": {"speedup_vs_eager": 1.5, "speedup_vs_compile": 1.1}}
        candidate = Candidate.objects.create(run=run, turn=1, source="# candidate\n", source_hash=f"c{i}",
                                             backend="cpp", verdict=verdict)
        Run.objects.filter(pk=run.pk).update(best_candidate=candidate, best_speedup=1.5)
        Kernel.objects.create(candidate=candidate, problem=problem, owner=user, name=f"k{i}", source="# kernel\n",
                              source_hash=f"k{i}", problem_hash=f"load{i}", backend="cpp", device="cpu",
                              produced_by=user, policy="user", speedup_vs_eager=1.5, speedup_vs_compile=1.1,
                              verified_at=timezone.now())


async def _client(url: str, token: str, until: float, offset: int, timings: dict[str, list[float]],
                  failures: dict[str, int]) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=60) as client:
        i = offset
        while time.monotonic() < until:
            path = ENDPOINTS[i % len(ENDPOINTS)]
            i += 1
            started = time.monotonic()
            try:
                response = await client.get(path)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok:
                timings[path].append(time.monotonic() - started)
            else:
                failures[path] += 1


async def _load(url: str, token: str, concurrency: int, seconds: float) -> tuple[dict[str, list[float]], dict[str, int], float]:
    timings: dict[str, list[float]] = defaultdict(list)
    failures: dict[str, int] = defaultdict(int)
    started = time.monotonic()
    await asyncio.gather(*[_client(url, token, started + seconds, k, timings, failures) for k in range(concurrency)])
    return timings, failures, time.monotonic() - started


def measure(url: str, token: str, *, concurrency: int, seconds: float) -> dict[str, Any]:
    timings, failures, elapsed = asyncio.run(_load(url, token, concurrency, seconds))
    per_endpoint = {path: {"requests": len(timings[path]), "errors": failures[path],
                           "per_second": round(len(timings[path]) / elapsed, 1), "latency_ms": _percentiles(timings[path])}
                    for path in ENDPOINTS}
    everything = [t for path in ENDPOINTS for t in timings[path]]
    return {"concurrency": concurrency, "seconds": round(elapsed, 1), "requests": len(everything),
            "errors": sum(failures.values()), "per_second": round(len(everything) / elapsed, 1),
            "latency_ms": _percentiles(everything), "endpoints": per_endpoint}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--items", type=int, default=60, help="problems, runs and kernels per user")
    args = parser.parse_args(argv)
    live_studio.setup_django()
    from rest_framework.authtoken.models import Token

    user = live_studio.bench_user()
    seed(user, args.items)
    seed(live_studio.bench_user("bench_other"), args.items)
    token = Token.objects.get_or_create(user=user)[0].key
    log = Path(tempfile.mkdtemp(prefix="load_api_")) / "daphne.log"
    url, daphne = live_studio.start_daphne({**os.environ, "API_THROTTLE_USER": "100000000/hour"}, log)
    try:
        report = measure(url, token, concurrency=args.concurrency, seconds=args.seconds)
    finally:
        live_studio.stop(daphne)
    report["items_per_user"] = args.items
    report["machine"] = live_studio.machine()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
