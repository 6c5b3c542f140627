"""The Content-Security-Policy does not break the studio: in headless Chromium, Monaco starts on the upload page
(web workers, inline styles), Swagger UI and ReDoc render, and the run page streams over its websocket, all with
no CSP violation in the browser's console. daphne serves the studio on the test database (Postgres) and Redis."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from apps.runs.models import Run
from apps.runs.events import append_event
from tests import processes
from tests.processes import ROOT
from tests.studio.browser import chrome, need_chromium

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def studio_url(tmp_path):
    need_chromium()
    url, web = processes.daphne(processes.studio_env(), tmp_path / "daphne.log")
    yield url
    processes.stop([web])


@pytest.fixture
def browser():
    driver = chrome(logs=("browser",))
    yield driver
    driver.quit()


def test_monaco_the_api_docs_and_the_live_run_page_work_under_the_policy(studio_url, browser, owner, problem):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    run = Run.objects.create(problem=problem, owner=owner)
    for i in range(3):
        append_event(run.pk, "note", {"i": i})
    client = Client()
    client.force_login(owner)
    browser.get(studio_url + "/accounts/login/")
    browser.add_cookie({"name": "sessionid", "value": client.cookies["sessionid"].value, "path": "/"})
    wait = WebDriverWait(browser, 120)

    if (ROOT / "static" / "vendor" / "monaco" / "vs" / "loader.js").exists():
        browser.get(studio_url + "/problems/new/")
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".editor.ready .monaco-editor")))
    browser.get(studio_url + "/api/v1/docs/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".swagger-ui .info .title")))
    assert "Kernel Studio API" in browser.find_element(By.CSS_SELECTOR, ".swagger-ui .info .title").text
    browser.get(studio_url + "/api/v1/redoc/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".api-content")))
    browser.get(studio_url + f"/runs/{run.pk}/")
    wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#events li")) == 3)
    wait.until(ec.text_to_be_present_in_element((By.ID, "connection"), "live"))

    refused = [entry["message"] for entry in browser.get_log("browser")
               if "Content Security Policy" in entry["message"] or "Refused to" in entry["message"]]
    # Blocking another origin is the policy's job (ReDoc's footer asks cdn.redoc.ly for its logo); blocking
    # anything of ours (a script, a style, a worker, the websocket) would be a broken page.
    ours = [m for m in refused if not re.search(r"'https?://(?!127\.0\.0\.1)[^']*'", m)]
    assert ours == [], ours
