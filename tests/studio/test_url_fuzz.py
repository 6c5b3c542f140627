"""Odd input to every page and API endpoint answers 4xx, never a server error, and the API answers in its JSON
error format: fuzzed path ids and query parameters (digits of other scripts, "²", numbers past 64 bits, NUL,
non-finite floats, long and quoted text), a JSON body nested 100,000 deep, unknown API paths, and the API's own
unexpected errors."""
from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from apps.batches.models import Batch, BatchItem
from apps.endpoints.models import ModelEndpoint
from apps.kernels.models import Kernel
from apps.problems.models import Problem
from apps.problems.services import sha256
from apps.runs.models import Candidate, Run
from apps.training.models import TrainingRun
from tests.apps.cast import GOOD_CANDIDATE, PROBLEM

pytestmark = pytest.mark.django_db

PARAMS = ["a", "b", "after", "limit", "problem", "status", "kind", "mine", "source_hash", "name", "problem_hash",
          "min_speedup", "device", "backend", "hardware", "ordering", "page", "page_size", "format", "next", "cursor"]
ODD = ["²", "١٢", "99999999999999999999", "-9223372036854775809", "-1", "1e309", "nan", "\x00abc", " 1", "1_0",
       "' OR 1=1 --", "<script>", "x" * 5000, "", "%", "\u202e\U0001f600", "[]", "csv", "-speedup", "1.5"]
IDS = ["0", "99999999999999999999", "9223372036854775807", "9223372036854775808", "18446744073709551616"]


@pytest.fixture
def world(django_user_model):
    """One of everything the pages show, owned by a superuser who may see every page."""
    admin = django_user_model.objects.create_superuser("fuzz-admin", password="fuzz-admin-pass-123")
    source = PROBLEM.read_text()
    problem = Problem.objects.create(owner=admin, name="p.py", source=source, source_hash=sha256(source),
                                     validation={"ok": True})
    endpoint = ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in templates (no model)"})[0]
    run = Run.objects.create(problem=problem, owner=admin, status=Run.Status.FINISHED, endpoint=endpoint)
    good = GOOD_CANDIDATE.read_text()
    candidate = Candidate.objects.create(run=run, turn=1, source=good, source_hash=sha256(good), backend="cpp",
                                         verdict={"status": "accepted", "correct": True})
    kernel = Kernel.objects.create(candidate=candidate, problem=problem, owner=admin, name="k", source=good,
                                   source_hash=sha256(good), problem_hash=problem.source_hash, backend="cpp", device="cpu",
                                   produced_by=admin, policy="user", verified_at=timezone.now())
    batch = Batch.objects.create(owner=admin, endpoint=endpoint, device="cpu")
    BatchItem.objects.create(batch=batch, problem=problem, run=Run.objects.create(problem=problem, owner=admin), position=0)
    training = TrainingRun.objects.create(owner=admin, config={"stages": ["rft"]})
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    ids = {"p": problem.pk, "r": run.pk, "t": 1, "k": kernel.pk, "b": batch.pk, "e": endpoint.pk, "tr": training.pk}
    return client, ids


PAGES = ["/problems/", "/problems/new/", "/problems/{p}/", "/runs/", "/runs/{r}/", "/runs/{r}/events/",
         "/runs/{r}/candidates/{t}/", "/runs/{r}/diff/", "/kernels/", "/kernels/problem/{p}/", "/kernels/{k}/",
         "/kernels/{k}/diff/", "/kernels/{k}/download/", "/kernels/{k}/package/", "/training/", "/training/{tr}/",
         "/training/{tr}/status/", "/accounts/tokens/", "/accounts/login/"]
API = ["/api/v1/problems/", "/api/v1/problems/{p}/", "/api/v1/runs/", "/api/v1/runs/{r}/", "/api/v1/runs/{r}/events/",
       "/api/v1/kernels/", "/api/v1/kernels/{k}/", "/api/v1/kernels/{k}/download/", "/api/v1/endpoints/",
       "/api/v1/endpoints/{e}/", "/api/v1/batches/", "/api/v1/batches/{b}/", "/api/v1/batches/{b}/report/"]


def _check(client: Client, url: str, params: dict[str, str]) -> int:
    response = client.get(url, params)
    assert response.status_code < 500, (url, params, response.status_code)
    if url.startswith("/api/") and response.status_code >= 400:
        body = response.json()
        assert set(body["error"]) >= {"code", "message", "fields"}, (url, params, body)
    return response.status_code


def test_the_reported_inputs_answer_400_or_404(world):
    client, ids = world
    response = client.get(f"/runs/{ids['r']}/diff/", {"a": "²"})
    assert response.status_code == 400 and "No candidate" in response.content.decode()
    response = client.get("/api/v1/runs/", {"problem": "99999999999999999999"})
    assert response.status_code == 400 and "at most" in response.json()["error"]["message"]
    response = client.get("/api/v1/kernels/", {"min_speedup": "nan"})
    assert response.status_code == 400 and "finite" in response.json()["error"]["message"]


@pytest.mark.parametrize("value", ODD)
def test_every_page_and_endpoint_answers_odd_query_parameters_without_a_server_error(world, value):
    client, ids = world
    for template in PAGES + API:
        url = template.format(**ids)
        _check(client, url, dict.fromkeys(PARAMS, value))
        for name in ("a", "after", "problem"):  # alone too: with all of them, the first refused hides the rest
            _check(client, url, {name: value})


def test_every_page_and_endpoint_answers_odd_ids_with_404(world):
    client, ids = world
    for template in PAGES + API:
        if "{" not in template:
            continue
        for odd in IDS:
            url = template.format(**{key: odd for key in ids})
            assert _check(client, url, {}) == 404, url


@settings(max_examples=150, deadline=None, database=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_query_parameters_never_make_a_server_error(world, data):
    client, ids = world
    template = data.draw(st.sampled_from(PAGES + API))
    params = data.draw(st.dictionaries(st.sampled_from(PARAMS), st.one_of(
        st.sampled_from(ODD), st.text(max_size=30), st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.floats().map(str)), max_size=4))
    _check(client, template.format(**ids), params)


def test_a_json_body_nested_100000_deep_is_a_400_in_the_apis_format(world):
    client, _ = world
    for body in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000, "[" * 40 + "]" * 40):
        response = client.post("/api/v1/runs/", body, content_type="application/json")
        assert response.status_code == 400 and response.json()["error"]["code"] == "parse_error"
        assert "nested" in response.json()["error"]["message"]


def test_unknown_api_paths_and_the_apis_own_failures_answer_in_its_json_format(world, monkeypatch, caplog):
    from apps.api import views

    client, ids = world
    response = client.get("/api/v1/no-such-thing/")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert client.get("/no-such-page/").status_code == 404

    def broken(*args, **kwargs):
        raise RuntimeError("a bug of ours")

    monkeypatch.setattr(views, "batches", type("Broken", (), {"report": staticmethod(broken)}))
    response = client.get(f"/api/v1/batches/{ids['b']}/report/")
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "server_error" and "a bug of ours" not in response.content.decode()
    assert "a bug of ours" in caplog.text  # logged with its traceback for the admins
