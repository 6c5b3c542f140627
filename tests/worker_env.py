"""Loaded as a plugin (`-p tests.worker_env`, pyproject's addopts) before Django reads its settings: under pytest-xdist
each worker gets a Redis database of its own (REDIS_URL's number minus the worker's index: gw0 keeps it, gw1 takes
the one below), as pytest-django gives each its own Postgres database. Celery workers, channel layers and the cache
of one xdist worker then never hear another's, and `flushdb` in one never empties another's."""
from __future__ import annotations

import os

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    _base, _, _db = os.environ["REDIS_URL"].rpartition("/")
    os.environ["REDIS_URL"] = f"{_base}/{int(_db or 0) - int(_worker[2:])}"
