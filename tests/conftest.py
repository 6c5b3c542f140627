"""Session fixtures shared across the tree.

A real OpenAI-compatible server for the policy and studio tests: `transformers serve` on loopback, serving a
tiny random Qwen2 model built offline in a temporary directory (see tiny_qwen.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.agent.policies.serving import STARTUP_SECONDS, Served, free_port


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[agent]')")
    pytest.importorskip("fastapi", reason="transformers serve needs transformers[serving] (pip install -e '.[agent]')")
    import httpx

    from tests.agent.policies import tiny_qwen

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
