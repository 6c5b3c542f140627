"""Shared by the browser tests: Debian's headless Chromium with its network log on, logging in, and
screenshots kept under test-artifacts/screenshots/ with checks on their pixels (Pillow)."""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tests.processes import ROOT

SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"


def need_chromium() -> None:
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian's chromium and chromium-driver (make browser)")


@contextmanager
def served(worker: str | None = None, logs: Path | None = None) -> Iterator[str]:
    """daphne (and a Celery worker named `worker`, when given) on the test database and Redis; yields the base URL.
    With `logs`, a folder: their output goes there (daphne.log, worker.log)."""
    from tests import processes

    need_chromium()
    env = processes.studio_env()
    url, web = processes.daphne(env, logs / "daphne.log" if logs else None)
    procs = [web] + ([processes.worker(env, worker, log=logs / "worker.log" if logs else None)] if worker else [])
    try:
        yield url
    finally:
        processes.stop(procs)


def chrome(width: int = 1440, height: int = 900, logs: tuple[str, ...] = ("performance",)):
    """Headless Chromium at a laptop's size, keeping the given logs: "performance" has every network
    request it makes, "browser" the pages' console messages."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={width},{height}",
                # No background traffic of the browser's own (updates, safe browsing): only what pages load.
                "--disable-background-networking", "--disable-component-update", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {log: "ALL" for log in logs})
    driver = webdriver.Chrome(service=Service(executable_path=shutil.which("chromedriver")), options=options)
    driver.implicitly_wait(5)
    return driver


def log_in(url: str, driver, username: str, password: str, timeout: float = 120):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, timeout)
    driver.get(url + "/accounts/login/")
    driver.find_element(By.NAME, "username").send_keys(username)
    driver.find_element(By.NAME, "password").send_keys(password)
    driver.find_element(By.ID, "login-button").click()
    wait.until(ec.url_contains("/problems/"))
    return wait


def requested_urls(driver) -> tuple[list[str], list[str]]:
    """Every URL the browser asked for since the last call (documents, scripts, styles, fonts, images,
    fetches, workers, websockets), and apart, those the page's Content-Security-Policy stopped inside
    the browser before any connection was made."""
    urls: dict[str, str] = {}
    blocked: set[str] = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        method = message.get("method")
        if method == "Network.requestWillBeSent":
            urls.setdefault(params["requestId"], params["request"]["url"])
        elif method == "Network.webSocketCreated":
            urls.setdefault(params["requestId"], params["url"])
        elif method == "Network.loadingFailed" and params.get("blockedReason") == "csp":
            blocked.add(params["requestId"])
    return [u for i, u in urls.items() if i not in blocked], [u for i, u in urls.items() if i in blocked]


def foreign(urls: list[str], base_url: str) -> list[str]:
    """The URLs not from the studio's own origin (data: and blob: are made by the page itself)."""
    origin = urlparse(base_url)
    bad = []
    for url in urls:
        u = urlparse(url)
        if u.scheme in ("data", "blob"):
            continue
        if u.scheme in ("http", "https", "ws", "wss") and u.netloc == origin.netloc:
            continue
        bad.append(url)
    return bad


def screenshot(element, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    element.screenshot(str(path))
    return path


def page_screenshot(driver, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def colours(path: Path) -> dict[tuple[int, int, int], int]:
    from PIL import Image

    with Image.open(path) as image:
        return {rgb: n for n, rgb in image.convert("RGB").getcolors(maxcolors=1 << 24)}


def share(path: Path, test) -> float:
    """The fraction of the image's pixels for which test(r, g, b) holds."""
    counts = colours(path)
    total = sum(counts.values())
    return sum(n for rgb, n in counts.items() if test(*rgb)) / total


def near(target: str, tolerance: int = 40):
    """A pixel test: within `tolerance` of the #rrggbb colour in every channel."""
    r0, g0, b0 = (int(target[i:i + 2], 16) for i in (1, 3, 5))
    return lambda r, g, b: abs(r - r0) <= tolerance and abs(g - g0) <= tolerance and abs(b - b0) <= tolerance
