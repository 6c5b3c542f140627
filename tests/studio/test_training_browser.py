"""Training from the admin in headless Chromium: an admin launches a two-stage pipeline (single-turn GRPO, then
rejection fine-tuning) on a tiny checkpoint, a real Celery worker of the `train` queue runs the real trainer,
the run's page charts the loss and the reward as they are logged, and the checkpoint it registered then drives
an agent run on a CPU problem. daphne and the worker run as separate processes on the test database (Postgres)
and Redis, as in production."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests import processes
from tests.apps.cast import problem, problem_checked  # noqa: F401
from tests.processes import ROOT
from tests.studio.browser import chrome, need_chromium

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCREENSHOT = ROOT / "test-artifacts" / "screenshots" / "training-run.png"


@pytest.fixture
def admin_user(django_user_model):
    return django_user_model.objects.create_superuser("admin", password="admin-pass-123")


@pytest.fixture
def owner(admin_user):
    return admin_user  # the cast's `problem` is uploaded by the admin here


@pytest.fixture
def tiny_checkpoint(tmp_path: Path) -> Path:
    from trainer.tiny import build

    return build(tmp_path / "tiny-model")


@pytest.fixture
def studio(tmp_path: Path):
    need_chromium()
    env = processes.studio_env(KSTUDIO_TRAINING_DIR=str(tmp_path / "training"))
    url, web = processes.daphne(env, log=tmp_path / "daphne.log")
    # One worker for every queue: the problem's check (build), the training (train), the agent's turns (agent, gpu).
    procs = [web, processes.worker(env, "training-browser", queues="build,gpu,agent,train", log=tmp_path / "worker.log")]
    yield url
    processes.stop(procs)


@pytest.fixture
def browser():
    driver = chrome(1400, 1000, logs=())
    yield driver
    driver.quit()


@pytest.fixture
def accepted_trajectory(admin_user, problem):
    """A finished agent run with an accepted, submitted candidate: what rejection fine-tuning trains on. Its
    trajectory has the shape agent.loop.trajectory.to_record writes (tests/trainer/records.py builds it from the
    agent's real prompt and tool schemas)."""
    from apps.runs.models import Run
    from tests.trainer import records

    return Run.objects.create(problem=problem, owner=admin_user, kind=Run.Kind.AGENT, status=Run.Status.FINISHED,
                              stage=Run.Stage.DONE, trajectory=records.good())


def test_an_admin_trains_a_model_and_the_agent_runs_on_its_checkpoint(studio, browser, admin_user, problem,
                                                                       accepted_trajectory, tiny_checkpoint):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from apps.endpoints.models import ModelEndpoint
    from apps.runs.models import Run
    from apps.training.models import TrainingRun

    wait = WebDriverWait(browser, 120)
    browser.get(studio + "/accounts/login/")
    browser.find_element(By.NAME, "username").send_keys("admin")
    browser.find_element(By.NAME, "password").send_keys("admin-pass-123")
    browser.find_element(By.ID, "login-button").click()
    wait.until(ec.url_contains("/problems/"))

    # The staff-only nav link, then the launch form in the admin.
    browser.find_element(By.LINK_TEXT, "Training").click()
    browser.find_element(By.ID, "launch-link").click()
    form = wait.until(ec.presence_of_element_located((By.ID, "launch-form")))
    form.find_element(By.NAME, "name").send_keys("browser")
    Select(form.find_element(By.NAME, "preset")).select_by_value("tiny-cpu")
    for stage in ("rft", "grpo_single"):
        form.find_element(By.CSS_SELECTOR, f"input[name=stages][value={stage}]").click()
    form.find_element(By.NAME, "base_model").send_keys(str(tiny_checkpoint))
    form.find_element(By.NAME, "max_steps").send_keys("2")
    form.find_element(By.NAME, "only_accepted").click()
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SCREENSHOT.with_name("training-launch.png")))
    browser.find_element(By.ID, "launch-button").click()

    # The run's page: status, log and both charts, updated live until the run is over.
    WebDriverWait(browser, 30).until(ec.presence_of_element_located((By.ID, "training")))
    WebDriverWait(browser, 420).until(
        lambda d: d.find_element(By.ID, "training").get_attribute("data-final") == "true")
    run = TrainingRun.objects.get()
    assert browser.find_element(By.ID, "training-status").text == "succeeded", f"{run.error}\n{run.log_tail[-3000:]}"
    assert browser.find_element(By.ID, "training-stages").text == "grpo_single → rft"
    assert browser.find_element(By.ID, "training-data").text == "trajectories: 1, problems: 1"
    # Four logged steps (two per stage); each has a loss, and the GRPO steps a reward.
    assert browser.find_element(By.ID, "loss-chart").get_attribute("data-points") == "4"
    assert browser.find_element(By.ID, "reward-chart").get_attribute("data-points") == "2"
    assert list(run.metrics.values_list("stage", "step")) == [("grpo_single", 1), ("grpo_single", 2), ("rft", 1), ("rft", 2)]
    assert "[pipeline] done" in browser.find_element(By.ID, "training-log").text
    assert not browser.find_elements(By.ID, "cancel-button")
    endpoint_link = browser.find_element(By.CSS_SELECTOR, "#training-endpoint a")
    assert endpoint_link.text == f"trained: training {run.pk} (browser)"
    browser.save_screenshot(str(SCREENSHOT))

    # The checkpoint drives an agent run. Its output is gibberish, so one short turn is enough to show that the
    # trained model, loaded by an agent worker, wrote the run's turns (an admin would shorten a turn the same way).
    endpoint = ModelEndpoint.objects.get(pk=run.endpoint_id)
    assert endpoint.kind == ModelEndpoint.Kind.TRANSFORMERS and endpoint.model == run.result["checkpoint"]
    assert not endpoint.enabled  # registered disabled: offered to users only once an admin enables it
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(max_tokens=48, enabled=True)
    browser.get(studio + problem.get_absolute_url())
    Select(browser.find_element(By.NAME, "endpoint")).select_by_visible_text(endpoint.name)
    turns = browser.find_element(By.NAME, "turns")
    turns.clear()  # the form shows the default budget: replace it, not append to it
    turns.send_keys("1")
    browser.find_element(By.ID, "optimize-button").click()
    WebDriverWait(browser, 300).until(
        lambda d: d.find_element(By.ID, "run-status").text in ("finished", "failed", "cancelled"))
    agent_run = Run.objects.get(kind=Run.Kind.AGENT, endpoint=endpoint)
    assert agent_run.is_terminal and agent_run.config["policy"] == f"transformers:{endpoint.name}"
    messages = agent_run.trajectory["messages"]
    assert [m for m in messages if m["role"] == "assistant"], f"no assistant turn recorded: {agent_run.message}"
    assert agent_run.trajectory["policy"].startswith("transformers"), agent_run.trajectory["policy"]
    assert browser.find_elements(By.CSS_SELECTOR, "#conversation .msg.assistant")
