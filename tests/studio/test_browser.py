"""The whole flow in headless Chromium: log in, upload a module, submit a candidate, watch the run
stream live over the websocket, find the kernel in the library. daphne and a Celery worker run as
separate processes on the test database (Postgres) and Redis, as in production."""
from __future__ import annotations

import re

import pytest

from tests.processes import ROOT
from tests.studio.browser import chrome, log_in, served
from tests.apps.cast import GOOD_CANDIDATE, PROBLEM
from tests.apps.cast import owner, problem, problem_checked  # noqa: F401

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def studio_url():
    with served(worker="browser") as url:
        yield url


@pytest.fixture
def browser():
    driver = chrome(800, 600, logs=())  # headless Chromium's own default size: this flow must work on a small window
    yield driver
    driver.quit()


def test_it_takes_a_user_from_upload_to_a_kernel_in_the_library(studio_url, browser, owner):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    wait = log_in(studio_url, browser, "owner", "owner-pass-123")

    # A bad upload first: the error is shown next to the code, with its line, and nothing is created.
    browser.get(studio_url + "/problems/new/")
    if (ROOT / "static" / "vendor" / "monaco" / "vs" / "loader.js").exists():
        wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".editor.ready")))  # Monaco, from our own origin
    bad = ROOT / "var" / "bad_problem.py"
    bad.parent.mkdir(exist_ok=True)
    bad.write_text("import torch\ndef get_inputs(:\n    return []\n")
    browser.find_element(By.NAME, "file").send_keys(str(bad))
    browser.find_element(By.ID, "upload-button").click()
    assert "syntax error" in wait.until(ec.presence_of_element_located((By.ID, "upload-error"))).text + \
        browser.find_element(By.ID, "issues").text
    assert "line 2" in browser.find_element(By.ID, "issues").text

    browser.get(studio_url + "/problems/new/")
    browser.find_element(By.NAME, "file").send_keys(str(PROBLEM))
    browser.find_element(By.ID, "upload-button").click()
    wait.until(ec.presence_of_element_located((By.ID, "candidate-form")))
    browser.find_element(By.CSS_SELECTOR, "#candidate-form input[name=file]").send_keys(str(GOOD_CANDIDATE))
    browser.find_element(By.ID, "start-button").click()

    # The run page streams: build, verification, timing, then the saved kernel, live.
    link = wait.until(ec.presence_of_element_located((By.ID, "kernel-saved")))
    # run_finished is the event after kernel_saved: on a loaded machine the page may not have drawn it yet.
    wait.until(ec.text_to_be_present_in_element((By.ID, "run-status"), "finished"))
    assert browser.find_elements(By.CSS_SELECTOR, "#events li.event-build")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#timing tr")) == 2
    assert re.fullmatch(r"[0-9.]+x vs (the best of eager and torch\.compile|eager)", browser.find_element(By.ID, "best-speedup").text)
    seqs = [int(li.get_attribute("data-seq")) for li in browser.find_elements(By.CSS_SELECTOR, "#events li")]
    assert seqs == list(range(1, len(seqs) + 1))
    link.click()
    wait.until(ec.presence_of_element_located((By.ID, "download")))
    browser.get(studio_url + "/kernels/")
    assert "elementwise_silu_bias" in browser.find_element(By.ID, "kernels").text


def test_an_agent_run_streams_its_conversation_and_charts_each_turn(studio_url, browser, owner, problem):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select

    from apps.endpoints.models import ModelEndpoint

    wrong = GOOD_CANDIDATE.parent / "fault_py_wrong_shape.py"
    script = [{"text": f"Trying {p.name}.", "tool_calls": [{"name": "write_candidate", "arguments": {"source": p.read_text()}}]}
              for p in (wrong, GOOD_CANDIDATE)] + [{"text": "Submitting the best.", "tool_calls": [{"name": "submit"}]}]
    ModelEndpoint.objects.create(name="demo script", kind=ModelEndpoint.Kind.SCRIPTED, script=script)
    wait = log_in(studio_url, browser, "owner", "owner-pass-123")
    browser.get(studio_url + problem.get_absolute_url())
    Select(browser.find_element(By.NAME, "endpoint")).select_by_visible_text("demo script")
    browser.find_element(By.ID, "optimize-button").click()

    wait.until(ec.presence_of_element_located((By.ID, "kernel-saved")))
    wait.until(ec.text_to_be_present_in_element((By.ID, "run-status"), "finished"))  # the event after kernel_saved
    turns = browser.find_elements(By.CSS_SELECTOR, "#conversation .msg.assistant")
    assert [t.get_attribute("data-turn") for t in turns] == ["0", "1", "2"]
    assert not browser.find_elements(By.CSS_SELECTOR, "#conversation .msg.streaming"), "streamed text was replaced"
    results = browser.find_elements(By.CSS_SELECTOR, "#conversation .msg.tool")
    assert "status: incorrect" in results[0].text and "status: accepted" in results[1].text
    # One chart point per evaluation: the wrong one at 0, the accepted one at its speedup.
    assert browser.find_element(By.ID, "speedup-chart").get_attribute("data-points") == "2"
    assert browser.execute_script("return window.Chart !== undefined"), "Chart.js is served from our origin"
    assert "Submitted" in browser.find_element(By.ID, "run-message").text
