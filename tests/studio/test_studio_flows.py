"""The studio's flows in headless Chromium, one daphne + Celery worker + browser for the module (they are
slow to start on a small box). In order: the upload editor, a live agent run (chart, conversation,
verdict and profiler panels), a candidate with build errors as markers, the diff editor, the library with
its leaderboard, provenance and exports, the theme and the shortcuts. Each flow keeps a screenshot under
test-artifacts/screenshots/ and checks its pixels. The tests share what the earlier ones made (the
problem, the run), so they run in file order."""
from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass, field

import pytest

from tests import processes
from tests.apps.cast import BAD_BUILD_CANDIDATE, GOOD_CANDIDATE, PROBLEM
from tests.studio.browser import chrome, log_in, near, need_chromium, page_screenshot, screenshot, share

# django_db (not transactional): pytest-django then sets up the test database, and each test's own
# transaction is empty; what the studio's processes write is committed, kept for the next test and
# flushed by the module fixture at the end.
pytestmark = [pytest.mark.django_db, pytest.mark.timeout(600), pytest.mark.slow]

PASSWORD = "flows-pass-123"
WRONG_CANDIDATE = GOOD_CANDIDATE.parent / "fault_py_wrong_shape.py"
# One point per evaluation on the chart: the build error and the wrong shape at 0, the good kernel and
# its re-evaluation by the profile tool at their speedups.
SCRIPT = [{"text": f"Reasoning about {p.name}: trying it.", "tool_calls": [{"name": "write_candidate", "arguments": {"source": p.read_text()}}]}
          for p in (BAD_BUILD_CANDIDATE, WRONG_CANDIDATE, GOOD_CANDIDATE)] + [
    {"text": "Where does the time go?", "tool_calls": [{"name": "profile", "arguments": {"candidate": "best"}}]},
    {"text": "Submitting the best.", "tool_calls": [{"name": "submit"}]}]


@dataclass
class Studio:
    url: str
    driver: object
    wait: object
    made: dict = field(default_factory=dict)

    def get(self, path: str) -> None:
        self.driver.get(self.url + path)

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def until(self, script: str, timeout: float = 60):
        """Poll a JS expression until it is truthy; returns its value."""
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout).until(lambda d: d.execute_script("return " + script))


@pytest.fixture(scope="module")
def studio(django_db_setup, django_db_blocker):
    need_chromium()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.endpoints.models import ModelEndpoint

    with django_db_blocker.unblock():
        # torch.compile is timed too (the chart's second series); its baseline is cached per problem.
        env = processes.studio_env(KSTUDIO_COMPILE_BASELINE="true")
        get_user_model().objects.create_user("flows", password=PASSWORD, is_staff=True, is_superuser=True)
        ModelEndpoint.objects.create(name="flows script", kind=ModelEndpoint.Kind.SCRIPTED, script=SCRIPT)
    url, web = processes.daphne(env)
    procs = [web, processes.worker(env, "flows")]
    driver = chrome()
    try:
        yield Studio(url, driver, log_in(url, driver, "flows", PASSWORD))
    finally:
        driver.quit()
        processes.stop(procs)
        with django_db_blocker.unblock():
            call_command("flush", interactive=False)  # what a transactional test leaves: nothing


def test_the_upload_editor_marks_errors_in_monaco_and_submits_with_ctrl_enter(studio):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec

    studio.get("/problems/new/")
    studio.wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".editor.ready")))
    studio.js("window.studioEditor.setValue(arguments[0])", "import torch\ndef get_inputs(:\n    return []\n")
    # As you type, before any submit: the same static check marks the error on its line.
    studio.until("Number(document.querySelector('.editor').dataset.liveMarkers || 0) > 0", 30)
    typed = studio.js("return monaco.editor.getModelMarkers({owner: 'as-typed'}).map(m => [m.startLineNumber, m.severity])")
    assert [2, 8] in typed, typed
    assert "found as you type" in studio.driver.find_element(By.ID, "editor-status").text
    studio.driver.find_element(By.CSS_SELECTOR, ".editor .monaco-editor textarea").send_keys(Keys.CONTROL, Keys.ENTER)
    studio.wait.until(ec.presence_of_element_located((By.ID, "upload-error")))
    studio.wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, ".editor.ready[data-markers]")))
    markers = studio.js("return monaco.editor.getModelMarkers({owner: 'validation'}).map(m => [m.startLineNumber, m.severity])")
    assert [2, 8] in markers, markers  # the syntax error, on its line, as an error (MarkerSeverity.Error = 8)
    studio.until("document.querySelector('.editor .squiggly-error') !== null", 30)
    # Revealing the marked line may scroll the first line out of view (a CI run saw only lines 2-4 drawn): from the
    # top, all four lines are on screen.
    studio.js("window.studioEditor.setScrollTop(0)")
    settle(studio, ".editor")
    shot = screenshot(studio.driver.find_element(By.CSS_SELECTOR, ".editor"), "upload-editor-markers")
    # The editor drew code: many pixels that are not its background, and the red error squiggle.
    assert share(shot, lambda r, g, b: r + g + b < 600) > 0.005
    assert share(shot, near("#e51400", 60)) > 0

    studio.driver.find_element(By.NAME, "name").send_keys("silu_flows.py")
    studio.js("window.studioEditor.setValue(arguments[0])", PROBLEM.read_text())
    studio.driver.find_element(By.CSS_SELECTOR, ".editor .monaco-editor textarea").send_keys(Keys.CONTROL, Keys.ENTER)
    studio.wait.until(ec.presence_of_element_located((By.ID, "agent-form")))
    studio.made["problem_url"] = studio.driver.current_url


def test_the_run_page_streams_the_conversation_the_chart_and_the_panels(studio):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    assert "problem_url" in studio.made, "needs the problem uploaded by the editor test"
    studio.driver.get(studio.made["problem_url"])
    Select(studio.driver.find_element(By.NAME, "endpoint")).select_by_visible_text("flows script")
    studio.driver.find_element(By.ID, "optimize-button").click()
    studio.wait.until(ec.url_contains("/runs/"))
    studio.made["run_url"] = studio.driver.current_url.split("?")[0]
    # The page was open from the start: what it shows arrived over the websocket as the run went.
    WebDriverWait(studio.driver, 300).until(ec.presence_of_element_located((By.ID, "kernel-saved")))
    studio.until("document.getElementById('run').dataset.panels === 'final'", 60)
    # Each evaluation's phases were shown as they arrived ("Now: timing round 2 ... s"), and none is left after the end.
    phase = studio.js("const p = document.getElementById('run-phase'); return {shown: Number(p.dataset.shown || 0), hidden: p.hidden}")
    assert phase["shown"] > 5 and phase["hidden"], phase

    chart = studio.js("const c = Chart.getChart(document.getElementById('speedup-chart'));"
                      "return {eager: c.data.datasets[0].data, compile: c.data.datasets[1].data, labels: c.data.labels}")
    assert len(chart["eager"]) == 4 and chart["eager"][:2] == [0, 0] and all(x > 0 for x in chart["eager"][2:]), chart
    assert [x for x in chart["compile"] if x is not None], "torch.compile was timed: its speedups are on the chart"
    shot = screenshot(studio.driver.find_element(By.ID, "speedup-chart"), "run-speedup-chart")
    assert share(shot, near("#8c959f")) > 0, "the rejected candidates' grey points are drawn"
    assert share(shot, near("#0969da")) > 0, "the accepted candidates' blue points are drawn"

    # The conversation: reasoning folded in <details>, tool results, collapsible all at once.
    assert len(studio.driver.find_elements(By.CSS_SELECTOR, "#conversation details.reasoning")) == len(SCRIPT)
    studio.driver.find_element(By.ID, "collapse-all").click()
    assert not studio.js("return [...document.querySelectorAll('#conversation details')].some(d => d.open)")
    studio.driver.find_element(By.ID, "expand-all").click()
    assert "status: build_error" in studio.driver.find_element(By.ID, "conversation").text

    # The panels: the best verdict with its trials and spread, flags in words, the profiler's table and the roofline facts.
    verdict = studio.driver.find_element(By.ID, "verdict-panel").text
    assert "accepted" in verdict and "max abs error" in verdict and "PyTorch eager" in verdict and "torch.compile" in verdict
    assert len(studio.driver.find_elements(By.CSS_SELECTOR, "#trials tr")) > 2
    profile = studio.driver.find_element(By.ID, "profile-panel").text
    assert "torch.profiler" in profile and "achieved bandwidth" in profile
    # A timed verdict carries the device's peaks, measured by our own job (CPU too): the roof is that measurement's.
    assert "measured: the fastest of the studio's memory kernels" in profile and "% of the bound" in profile, profile
    assert studio.driver.find_elements(By.CSS_SELECTOR, "#profile-table tr td")
    page_screenshot(studio.driver, "run-page")


def test_a_candidate_that_did_not_build_shows_the_compiler_errors_on_its_lines(studio):
    from selenium.webdriver.common.by import By

    assert "run_url" in studio.made, "needs the run of the run-page test"
    studio.driver.get(studio.made["run_url"] + "candidates/1/")
    studio.until("document.querySelector('#source-view.ready') !== null", 60)
    markers = studio.js("return monaco.editor.getModelMarkers({owner: 'build'}).map(m => [m.startLineNumber, m.message])")
    lines = BAD_BUILD_CANDIDATE.read_text().splitlines()
    assert markers and all(m[0] in (12, 13) for m in markers), markers
    assert lines[11].strip().startswith("float* yp") and any("undeclared_silu" in m[1] for m in markers)
    studio.until("document.querySelector('#source-view .squiggly-error') !== null", 30)
    settle(studio, "#source-view")
    shot = screenshot(studio.driver.find_element(By.ID, "source-view"), "candidate-build-errors")
    assert share(shot, near("#e51400", 60)) > 0, "the error squiggles are drawn"
    assert "build_error" in studio.driver.find_element(By.ID, "candidate-status").text


def test_the_diff_editor_shows_what_changed_between_two_candidates_and_against_the_reference(studio):
    from selenium.webdriver.common.by import By

    assert "run_url" in studio.made, "needs the run of the run-page test"
    studio.driver.get(studio.made["run_url"] + "diff/?a=2&b=3")
    changes = int(studio.until("document.getElementById('diff').dataset.changes", 60))
    assert changes > 0
    studio.until("document.querySelectorAll('#diff .line-insert, #diff .line-delete').length > 0", 30)
    settle(studio, "#diff .editor.original", "#diff .editor.modified")
    shot = screenshot(studio.driver.find_element(By.ID, "diff"), "diff-candidates")
    assert share(shot, lambda r, g, b: g > r + 12 and g > b + 12) > 0.001, "inserted lines are tinted green"
    assert share(shot, lambda r, g, b: r > g + 20 and r > b + 20) > 0.001, "deleted lines are tinted red"
    studio.driver.get(studio.made["run_url"] + "diff/?a=reference&b=3")
    assert int(studio.until("document.getElementById('diff').dataset.changes", 60)) > 0
    assert "the reference module silu_flows" in studio.driver.find_element(By.TAG_NAME, "main").text


def test_profile_this_candidate_runs_it_again_with_the_profiler_and_its_page_shows_the_table(studio):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    assert "run_url" in studio.made, "needs the run of the run-page test"
    # The good kernel's own turn was timed, not profiled (the agent's profile tool made a turn of its own).
    studio.driver.get(studio.made["run_url"] + "candidates/3/")
    assert studio.driver.find_element(By.ID, "no-profile").is_displayed()
    studio.driver.find_element(By.ID, "profile-button").click()
    # The candidate's own page has "/runs/" in its address too: wait for the redirect to a run page that is not the
    # original run's (on a loaded box the click returns before the POST's redirect has landed).
    new_run = re.compile(r".*/runs/\d+/")
    studio.wait.until(lambda d: new_run.fullmatch(d.current_url.split("?")[0])
                      and d.current_url.split("?")[0] != studio.made["run_url"])
    profiled = studio.driver.current_url.split("?")[0]
    # The new run's page is live from the start; once it ends, the server's panels replace the live ones.
    studio.until("document.getElementById('run').dataset.panels === 'final'", 300)
    assert "Profiled candidate 3 of run" in studio.driver.find_element(By.TAG_NAME, "main").text
    studio.driver.get(profiled + "candidates/1/")
    studio.wait.until(ec.presence_of_element_located((By.ID, "profile-table")))
    assert not studio.driver.find_elements(By.ID, "profile-button"), "a profiled candidate offers no second profile"
    rows = studio.js("return document.querySelectorAll('#profile-table tr').length")
    assert rows > 1, "the profiler's table has rows beside its header"
    table = studio.driver.find_element(By.ID, "profile-table")
    studio.js("arguments[0].scrollIntoView({block: 'center'})", table)
    shot = screenshot(table, "profile-this-candidate")
    assert share(shot, lambda r, g, b: r + g + b < 600) > 0.01, "the table's text was drawn"


def settle(studio, *editors: str) -> None:
    """Wait until each Monaco editor has drawn text, then two animation frames (Monaco paints in them)."""
    for editor in editors:
        studio.until(f"[...document.querySelectorAll('{editor} .view-line')].some(l => l.textContent.trim())", 30)
    studio.driver.execute_async_script("const done = arguments[0]; requestAnimationFrame(() => requestAnimationFrame(done));")


def test_the_library_sorts_filters_ranks_and_exports_the_kernel_with_its_provenance(studio):
    from selenium.webdriver.common.by import By

    assert "run_url" in studio.made, "needs the kernel of the run-page test"
    studio.get("/kernels/")
    table = studio.driver.find_element(By.ID, "kernels")
    table.find_element(By.XPATH, ".//th[6]").click()
    assert table.get_attribute("data-sorted-by") == "5-asc"
    studio.driver.find_element(By.ID, "kernel-search").send_keys("no such kernel")
    assert table.get_attribute("data-shown") == "0"
    studio.driver.find_element(By.ID, "kernel-search").clear()
    studio.driver.find_element(By.ID, "filter-speedup").send_keys("0")
    assert table.get_attribute("data-shown") == "1"
    page_screenshot(studio.driver, "library")

    table.find_element(By.CSS_SELECTOR, "a[href^='/kernels/problem/']").click()
    board = studio.driver.find_element(By.CSS_SELECTOR, ".leaderboard")
    assert board.get_attribute("data-hardware") and "silu_flows" in board.text

    board.find_element(By.CSS_SELECTOR, "td a").click()
    studio.until("document.querySelector('#kernel-view.ready') !== null", 60)
    provenance = studio.driver.find_element(By.ID, "provenance").text
    from agent.engine.hardware import host_facts

    # The machine by its CPU's model name (agent/engine/hardware.py), not just "x86_64".
    assert "policy scripted" in provenance and "toolchain torch" in provenance, provenance
    assert f"hardware {host_facts()['host_cpu']}" in provenance, provenance
    assert "write_candidate" in studio.driver.find_element(By.ID, "trajectory").text
    settle(studio, "#kernel-view")
    shot = screenshot(studio.driver.find_element(By.ID, "kernel-view"), "kernel-source")
    assert share(shot, lambda r, g, b: r + g + b < 600) > 0.005, "the kernel's source is drawn"
    # The exports, fetched as the page's own links would be.
    package = studio.js("return fetch(document.getElementById('download-package').href).then(r => r.arrayBuffer())"
                        ".then(b => Array.from(new Uint8Array(b)))")
    with zipfile.ZipFile(io.BytesIO(bytes(package))) as archive:
        assert any(n.endswith("/kstudio.json") for n in archive.namelist())
        assert any(n.endswith("/pyproject.toml") for n in archive.namelist())
    module = studio.js("return fetch(document.getElementById('download').href).then(r => r.text())")
    assert "def load(*init_inputs)" in module and "class ModelNew" in module


def test_the_theme_switches_with_its_shortcut_and_is_remembered_and_the_help_lists_the_keys(studio):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    assert "run_url" in studio.made, "needs the run of the run-page test"
    studio.driver.get(studio.made["run_url"] + "candidates/3/")
    studio.until("document.querySelector('#source-view.ready') !== null", 60)
    start = studio.js("return document.documentElement.dataset.theme")
    ActionChains(studio.driver).key_down(Keys.ALT).send_keys("t").key_up(Keys.ALT).perform()
    other = "dark" if start == "light" else "light"
    assert studio.js("return document.documentElement.dataset.theme") == other
    studio.driver.refresh()
    studio.until("document.querySelector('#source-view.ready') !== null", 60)
    assert studio.js("return document.documentElement.dataset.theme") == other, "kept in localStorage"
    dark = studio.js("return document.documentElement.dataset.theme") == "dark"
    assert studio.js("return getComputedStyle(document.body).backgroundColor") == ("rgb(15, 20, 25)" if dark else "rgb(255, 255, 255)")
    settle(studio, "#source-view")
    shot = screenshot(studio.driver.find_element(By.ID, "source-view"), f"candidate-{other}-theme")
    background = near("#1e1e1e", 8) if dark else near("#fffffe", 3)  # Monaco's vs-dark / vs editor backgrounds
    assert share(shot, background) > 0.3, "Monaco follows the theme"

    studio.driver.find_element(By.TAG_NAME, "body").send_keys("?")
    help_box = studio.driver.find_element(By.ID, "shortcut-help")
    assert help_box.is_displayed() and "Alt+T" in help_box.text and "Alt+N" not in help_box.text  # no diff here
    page_screenshot(studio.driver, "shortcut-help")
    studio.driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    assert not help_box.is_displayed()
    ActionChains(studio.driver).key_down(Keys.ALT).send_keys("t").key_up(Keys.ALT).perform()  # back, for later tests
    assert studio.js("return document.documentElement.dataset.theme") == start
