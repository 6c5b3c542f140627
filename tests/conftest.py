"""Session fixtures shared across the tree.

A real OpenAI-compatible server for the policy and studio tests: `transformers serve` on loopback, serving a
tiny random Qwen2 model built offline in a temporary directory (see tiny_qwen.py)."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from django.conf import settings

from tests.agent.loop.policies.serving import STARTUP_SECONDS, Served, free_port

# Logins hash with MD5 in the tests, here and in every server and worker they start (which inherit the
# environment): Django's PBKDF2 costs about a second a login on a loaded 2-core box. Settings are loaded already
# (pytest-django), so this process's list is set directly, before anything has hashed.
FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
os.environ["KSTUDIO_PASSWORD_HASHERS"] = ",".join(FAST_HASHERS)
settings.PASSWORD_HASHERS = FAST_HASHERS

# The slow tier, which `make test-fast` leaves out: tests that start real processes taking seconds each (sandboxed
# evaluations and builds, workers, servers, browsers, model training). A test is in it when it uses one of these
# fixtures, or when its module says so itself (`pytestmark = pytest.mark.slow`).
SLOW_FIXTURES = frozenset({
    "evaluator", "evaluators", "toolbox", "submitted", "silu_built", "fast_eval", "box", "walled",  # the engine
    "worker", "workers", "studio_with_worker", "studio", "check_worker", "services", "live",  # workers, servers
    "browser", "tiny_server",  # Chromium, `transformers serve`
    "tiny_model", "tiny_checkpoint", "engine", "trainer", "trained_critic",  # training
})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


# The rows data migrations make (a fresh studio's built-in endpoint): a transactional test ends by emptying every
# table (Django's flush). Serially pytest-django runs those tests last; under pytest-xdist a worker may run another
# file's tests after one, so every database test starts with the rows as the migrations make them.
_BUILTIN_ENDPOINT = importlib.import_module("apps.endpoints.migrations.0003_builtin_endpoint")


@pytest.fixture(autouse=True)
def _rows_the_migrations_made(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("django_db") is None:
        return
    from django.apps import apps as registry

    request.getfixturevalue("django_db_setup")  # the test database exists before anything is written
    with request.getfixturevalue("django_db_blocker").unblock():
        _BUILTIN_ENDPOINT.create(registry, None)


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[agent]')")
    pytest.importorskip("fastapi", reason="transformers serve needs transformers[serving] (pip install -e '.[agent]')")
    import httpx

    from tests.agent.loop.policies import tiny_qwen

    root = tmp_path_factory.mktemp("tiny_qwen")
    model_dir = tiny_qwen.build(root / "model")
    port = free_port()
    # Offline and with a private cache: the server must never reach the Hub, and an empty cache
    # directory keeps its model listing from failing.
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf_home"), "TRANSFORMERS_VERBOSITY": "error"}
    (root / "hf_home" / "hub").mkdir(parents=True)
    log_path = root / "serve.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "transformers.cli.transformers", "serve", str(model_dir),
             "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--default-seed", "0"],
            stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            if server.poll() is not None:
                pytest.fail(f"transformers serve exited with {server.returncode}:\n{log_path.read_text()[-4000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve did not answer /health in {STARTUP_SECONDS} s:\n{log_path.read_text()[-4000:]}")
            time.sleep(0.25)
        yield Served(base_url=f"http://127.0.0.1:{port}/v1", model=str(model_dir))
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
