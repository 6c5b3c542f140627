"""What a newcomer sees, in headless Chromium against daphne (no worker: the runs and the batch are stored as a
worker would leave them, events included, so the pages replay them exactly as they streamed): the run page after
the end (its stage, its live candidates table, one turn numbering, the chart's points, no token count without a
model), the batch page, and no page of the studio logging a JavaScript error. Screenshots are kept under
test-artifacts/screenshots/."""
from __future__ import annotations

import pytest

from tests.apps.cast import PROBLEM, owner  # noqa: F401
from tests.studio.browser import chrome, log_in, near, page_screenshot, screenshot, served, share

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Installed before the page's own scripts: every change to the candidates table is recorded, so the test sees what
# the live table showed before the final refresh replaced it with the server's.
RECORD_TABLE = """
window.__tables = [];
document.addEventListener("DOMContentLoaded", () => {
  // Only while the page is live: the end's refresh (panels "final") puts the server's table in.
  const snap = () => { const t = document.getElementById("candidates");
    if (!t || document.getElementById("run").dataset.panels === "final") return;
    window.__tables.push([...t.querySelectorAll("tr[data-turn]")].map((r) => [...r.cells].map((c) => c.textContent))); };
  new MutationObserver(snap).observe(document.getElementById("run"), {subtree: true, childList: true, characterData: true});
});
"""


@pytest.fixture
def studio_url():
    with served() as url:
        yield url


@pytest.fixture
def studio_with_worker(tmp_path):
    """daphne and a worker: an upload is checked in the worker's sandbox."""
    with served(worker="pages", logs=tmp_path) as url:
        yield url


@pytest.fixture
def problem(owner):
    """Checked in this process's own sandbox: no worker runs beside these pages."""
    from apps.problems.services import create_problem
    from apps.runs.engine import close_evaluator

    try:
        yield create_problem(owner, "silu_bias.py", PROBLEM.read_text(), in_process=True)
    finally:
        close_evaluator()


@pytest.fixture
def browser():
    driver = chrome(1280, 900, logs=("browser",))
    yield driver
    driver.quit()


def agent_run(owner, problem):
    """A finished agent run as the worker leaves it: turn 0 wrote a candidate that did not build, turn 1 an accepted
    one (timed), then it submitted; its kernel is in the library."""
    from apps.kernels.services import keep_accepted
    from apps.problems.services import sha256
    from apps.runs.models import Candidate, Run
    from apps.runs.events import append_event
    from tests.apps.cast import BAD_BUILD_CANDIDATE, GOOD_CANDIDATE
    from tests.apps.runs.pages import VERDICT

    run = Run.objects.create(problem=problem, owner=owner, kind=Run.Kind.AGENT, status=Run.Status.FINISHED,
                             stage=Run.Stage.DONE, config={"policy": "builtin:built-in", "endpoint": "built-in"},
                             budgets={"turns": 5, "tokens": 1000, "agent_wall_seconds": 60})
    bad, good = BAD_BUILD_CANDIDATE.read_text(), GOOD_CANDIDATE.read_text()
    Candidate.objects.create(run=run, turn=1, source=bad, source_hash=sha256(bad), backend="cpp",
                             verdict={"status": "build_error", "stage": "build", "message": "compiling failed"})
    accepted = Candidate.objects.create(run=run, turn=2, source=good, source_hash=sha256(good), backend="cpp",
                                        build=VERDICT["build"], verdict=VERDICT)
    timing = VERDICT["timing"]
    for turn, candidate, verdict in ((0, 1, {"status": "build_error", "stage": "build", "correct": False,
                                               "message": "compiling failed", "trials": [], "flags": []}),
                                     (1, 2, VERDICT)):
        append_event(run.pk, "step_started", {"stage": "think", "attempt": 1, "resumed": False})
        append_event(run.pk, "assistant", {"turn": turn, "text": f"Trying candidate {candidate}.", "completion_tokens": 40,
                                           "total_tokens": 80 * (turn + 1),
                                           "tool_calls": [{"id": f"c{turn}", "name": "write_candidate", "arguments": "{}"}]})
        append_event(run.pk, "step_started", {"stage": "act", "attempt": 1, "resumed": False})
        append_event(run.pk, "tool_result", {"turn": turn, "id": f"c{turn}", "tool": "write_candidate",
                                             "content": f"status: {verdict['status']}", "error": False})
        append_event(run.pk, "verification", {"turn": candidate, "agent_turn": turn, "tool": "write_candidate",
                                              **{k: verdict.get(k) for k in ("status", "stage", "correct", "message",
                                                                              "trials", "flags", "weights")}})
        if verdict is VERDICT:
            append_event(run.pk, "timing", {"turn": candidate, "agent_turn": turn, "tool": "write_candidate",
                                            **{k: timing[k] for k in ("candidate_ms", "eager_ms", "compile_ms",
                                                                      "speedup_vs_eager", "speedup_vs_compile", "clock",
                                                                      "speedup_vs_best", "sol_fraction")},
                                            "spread": {k: timing[k] for k in ("candidate", "eager", "compile")}})
            append_event(run.pk, "best", {"turn": candidate, "speedup_vs_eager": 2.0, "agent_turn": turn})
    run.best_candidate, run.best_speedup = accepted, 2.0
    run.save(update_fields=["best_candidate", "best_speedup"])
    kernel = keep_accepted(accepted)
    append_event(run.pk, "kernel_saved", {"kernel": kernel.pk, "url": kernel.get_absolute_url(), "name": kernel.name})
    append_event(run.pk, "run_finished", {"status": "finished", "message": "Submitted: best 2.00x.", "best_speedup": 2.0})
    return run, kernel


def js_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_the_run_page_after_the_end_tells_the_truth(studio_url, browser, owner, problem):
    from selenium.webdriver.common.by import By

    run, _ = agent_run(owner, problem)
    log_in(studio_url, browser, "owner", "owner-pass-123")
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_TABLE})
    browser.get(studio_url + run.get_absolute_url())
    wait_for(browser, "document.getElementById('run').dataset.panels === 'final'")

    # The stage after the end is "done", as the server and the API say, not the last step's ("act").
    assert browser.find_element(By.ID, "run-stage").text == "done"
    # The live table had the accepted candidate's speedup before the end's refresh.
    live = browser.execute_script("return window.__tables")
    assert any(rows and rows[-1][2] == "2.00x" for rows in live), live
    # One numbering: turns count from 1 in the conversation and on the chart, candidates from #1.
    conversation = browser.find_element(By.ID, "conversation").text
    assert "turn 1 · model" in conversation and "turn 2 · write_candidate" in conversation and "turn 0" not in conversation
    labels = browser.execute_script("return Chart.getChart(document.getElementById('speedup-chart')).data.labels")
    assert labels == ["turn 1 · #1", "turn 2 · #2"]
    assert [r.text.split()[0] for r in browser.find_elements(By.CSS_SELECTOR, "#timing tr")[1:]] == ["2"]
    # The headline is the speedup over the faster of eager and torch.compile, with the share of the speed of light,
    # live in the timing table and in the final verdict; each input variant is timed on its own.
    header = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#timing tr th")]
    cells = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#timing tr td")]
    assert cells[header.index("vs best")] == "2.00x" and cells[header.index("SOL")] == "25.0%"
    assert "2.00x over the faster of eager and torch.compile" in browser.find_element(By.ID, "headline-speedup").text
    assert browser.find_element(By.ID, "sol-headline").text == "25% of the speed of light"
    assert "variant1" in browser.find_element(By.ID, "variant-timing").text
    assert "Speed of light" in browser.find_element(By.ID, "profile-panel").text
    # Every candidate's point is drawn above the best-so-far line (grey rejected, blue accepted).
    orders = browser.execute_script("return Chart.getChart(document.getElementById('speedup-chart')).data.datasets.map(d => d.order)")
    assert orders[0] < orders[2]
    shot = screenshot(browser.find_element(By.ID, "speedup-chart"), "run-chart-points")
    assert share(shot, near("#8c959f")) > 0 and share(shot, near("#0969da")) > 0
    # A policy with no language model spends no tokens: none are shown.
    assert not browser.find_elements(By.ID, "tokens-used") and "tokens)" not in conversation
    page_screenshot(browser, "run-page-after-the-end")
    assert js_errors(browser) == []


def test_the_batch_page_shows_progress_per_problem_the_report_and_downloads(studio_url, browser, owner):
    from selenium.webdriver.common.by import By

    from apps.endpoints.models import ModelEndpoint
    from tests.apps.batches.test_services import _stored_batch

    endpoint = ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in"})[0]
    batch = _stored_batch(owner, [("accepted", 2.0, None), ("incorrect", 5.0, 5.0), None], endpoint)
    log_in(studio_url, browser, "owner", "owner-pass-123")
    browser.find_element(By.LINK_TEXT, "Batches").click()
    browser.find_element(By.CSS_SELECTOR, f"#batches a[href='/batches/{batch.pk}/']").click()
    assert browser.find_element(By.ID, "batch-progress").text == "2/3"
    rows = browser.find_elements(By.CSS_SELECTOR, "#batch-rows tr[data-position]")
    assert [r.find_element(By.CLASS_NAME, "run-status").text for r in rows] == ["finished", "finished", "running"]
    assert browser.find_element(By.CSS_SELECTOR, "#summary td[data-fast='1']").text == "33%"
    csv = browser.execute_script("return fetch(document.getElementById('report-csv').href).then(r => r.text())")
    assert csv.splitlines()[0].startswith("position,problem_id,problem") and len(csv.splitlines()) == 4
    page_screenshot(browser, "batch-page")
    assert js_errors(browser) == []


def test_no_page_logs_a_javascript_error(studio_url, browser, owner, problem):
    from selenium.webdriver.common.by import By

    from apps.endpoints.models import ModelEndpoint
    from tests.apps.batches.test_services import _stored_batch

    run, kernel = agent_run(owner, problem)
    endpoint = ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in"})[0]
    batch = _stored_batch(owner, [("accepted", 2.0, None)], endpoint)
    pages = ["/accounts/login/", "LOG IN",
             "/problems/", "/problems/new/", problem.get_absolute_url(), "/runs/", run.get_absolute_url(),
             f"/runs/{run.pk}/candidates/1/", f"/runs/{run.pk}/diff/?a=1&b=2", "/kernels/", kernel.get_absolute_url(),
             f"/kernels/{kernel.pk}/diff/", f"/kernels/problem/{problem.pk}/", "/batches/", f"/batches/{batch.pk}/",
             "/accounts/tokens/"]
    errors = {}
    for path in pages:
        if path == "LOG IN":  # the page before it is a logged-out one (signup is off by default: a 404)
            log_in(studio_url, browser, "owner", "owner-pass-123")
            continue
        browser.get(studio_url + path)
        browser.find_element(By.TAG_NAME, "main")
        browser.execute_async_script("const done = arguments[0]; setTimeout(done, 1500);")  # late scripts (Monaco, sockets)
        found = js_errors(browser)
        # An error a page catches and prints instead (the editor's status line) is an error too; every editor starts.
        found += browser.execute_script(
            "return [...document.querySelectorAll('#editor-status')].map(e => e.textContent)"
            ".filter(t => /not a function|undefined|Error/.test(t))")
        found += ["an editor did not start"] * browser.execute_script(
            "return document.querySelectorAll('[data-editor-for]:not(.ready)').length")
        if found:
            errors[path] = found
    assert errors == {}


def wait_for(driver, script: str, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script("return " + script))


def test_a_chosen_file_loads_into_the_editor_and_is_uploaded_as_edited(studio_with_worker, browser, owner):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    from apps.problems.models import Problem
    from apps.problems.services import sha256

    studio_url = studio_with_worker
    wait = log_in(studio_url, browser, "owner", "owner-pass-123")
    browser.get(studio_url + "/problems/new/")
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".editor.ready")))
    browser.find_element(By.NAME, "file").send_keys(str(PROBLEM))
    wait_for(browser, "document.querySelector('.editor').dataset.loaded === 'elementwise_silu_bias.py'")
    assert browser.execute_script("return window.studioEditor.getValue()") == PROBLEM.read_text()
    assert browser.find_element(By.NAME, "name").get_attribute("value") == "elementwise_silu_bias"
    edited = PROBLEM.read_text().replace("BATCH = 1024", "BATCH = 64")
    browser.execute_script("window.studioEditor.setValue(arguments[0])", edited)  # smaller sizes before uploading
    page_screenshot(browser, "upload-file-in-editor")
    browser.find_element(By.ID, "upload-button").click()
    wait_for(browser, "document.getElementById('candidate-form') || document.getElementById('upload-error')", 180)
    assert not browser.find_elements(By.ID, "upload-error"), browser.find_element(By.ID, "upload-error").text
    problem = Problem.objects.get()
    assert problem.source_hash == sha256(edited) and problem.name == "elementwise_silu_bias"
