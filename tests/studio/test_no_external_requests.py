"""No page of the studio loads anything from another origin: headless Chromium's network log over every
page (login, problems, upload, a run page with its live websocket, a candidate, a diff, the library, a
leaderboard, a kernel's provenance, the API docs, the token page, the admin)."""
from __future__ import annotations

import pytest

from tests import processes
from tests.studio.browser import chrome, foreign, log_in, near, need_chromium, page_screenshot, requested_urls, screenshot, share

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300), pytest.mark.slow]


@pytest.fixture
def site(django_user_model):
    """Everything a page can show, made in the database directly: no worker is needed to render pages."""
    need_chromium()
    from apps.problems.models import Problem
    from apps.problems.services import sha256
    from tests.apps.cast import PROBLEM
    from tests.apps.runs.pages import make_finished_run

    env = processes.studio_env()
    admin = django_user_model.objects.create_user("admin", password="admin-pass-123", is_staff=True, is_superuser=True)
    source = PROBLEM.read_text()
    # As if checked and timed on an H100 (work with FLOPs and a copy bandwidth): the roofline chart is drawn.
    problem = Problem.objects.create(owner=admin, name="silu.py", source=source, source_hash=sha256(source),
                                     validation={"ok": True, "run": {"work": {"bytes": 8392704, "flops": 4 * 1048576,
                                                                              "copy_bytes_per_s": 2.9e12}}})
    made = make_finished_run(admin, problem)
    accepted = made["run"].best_candidate
    accepted.verdict = {**accepted.verdict, "hardware": {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132}}
    accepted.save(update_fields=["verdict"])
    url, web = processes.daphne(env)
    driver = chrome()
    yield url, driver, made
    driver.quit()
    processes.stop([web])


def test_no_page_loads_anything_from_another_origin(site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    url, driver, made = site
    run, kernel = made["run"], made["kernel"]
    visited: dict[str, list[str]] = {}
    stopped: dict[str, list[str]] = {}  # attempts the CSP stopped in the browser: nothing was loaded
    driver.get(url + "/accounts/login/")
    visited["/accounts/login/"], stopped["/accounts/login/"] = requested_urls(driver)
    log_in(url, driver, "admin", "admin-pass-123")
    # Each page with what shows it finished loading its assets (Monaco, the charts, the docs' bundles).
    pages = [("/problems/", "table"), ("/problems/new/", ".editor.ready"), (f"/problems/{run.problem_id}/", ".code-view"),
             (f"/runs/{run.pk}/", "#run[data-panels='final']"), (f"/runs/{run.pk}/candidates/1/", "#source-view.ready"),
             (f"/runs/{run.pk}/diff/?a=1&b=2", "#diff.ready"), ("/kernels/", "#kernels"),
             (f"/kernels/problem/{run.problem_id}/", ".leaderboard"), (f"/kernels/{kernel.pk}/", "#kernel-view.ready"),
             (f"/kernels/{kernel.pk}/diff/", "#diff.ready"), ("/runs/", "table"), ("/accounts/tokens/", "main"),
             ("/api/v1/docs/", ".swagger-ui .info"), ("/api/v1/redoc/", "h1"), ("/admin/", "#content")]
    for path, ready in pages:
        driver.get(url + path)
        WebDriverWait(driver, 90).until(ec.presence_of_element_located((By.CSS_SELECTOR, ready)))
        visited[path], stopped[path] = requested_urls(driver)
        if path == f"/runs/{run.pk}/":
            WebDriverWait(driver, 30).until(ec.presence_of_element_located((By.CSS_SELECTOR, "#roofline-chart[data-drawn='true']")))
            chart = screenshot(driver.find_element(By.ID, "roofline-chart"), "roofline-h100")
            assert share(chart, near("#b3261e")) > 0 and share(chart, near("#0969da")) > 0, "the kernel's point and the roof"
            assert "measured: device-to-device copy" in driver.find_element(By.ID, "roofline-table").text
    page_screenshot(driver, "admin")

    assert len(visited) == len(pages) + 1
    for path, urls in visited.items():
        assert urls, f"{path}: the network log recorded nothing (is performance logging on?)"
        assert not foreign(urls, url), f"{path} loaded from another origin: {foreign(urls, url)}"
    # ReDoc's bundle hard-codes its sidebar logo at cdn.redoc.ly; the CSP (img-src 'self') stops it before
    # it leaves the browser. Any other page trying another origin is a bug even when the CSP catches it.
    attempts = {p: u for p, u in stopped.items() if foreign(u, url)}
    assert set(attempts) <= {"/api/v1/redoc/"} and all("cdn.redoc.ly" in u for u in attempts.get("/api/v1/redoc/", [])), attempts
    everything = [u for urls in visited.values() for u in urls]
    assert any("/static/vendor/monaco/" in u for u in everything) and any(u.startswith("ws://") for u in everything)
    assert any("/static/vendor/chartjs/" in u for u in everything)
