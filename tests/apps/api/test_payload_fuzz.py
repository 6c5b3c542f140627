"""Property-based fuzzing (hypothesis) of the API's write payloads, in process: JSON of any shape around the
fields each endpoint expects, and bytes that are not JSON at all. Every answer is a success or a 4xx in the
API's error format with a message; never a 500. (The live, schema-driven fuzz is test_fuzz.py.)
Derandomized: the same examples on every run, so `make test` cannot flake on a new one."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.apps.cast import PROBLEM

pytestmark = pytest.mark.django_db

FUZZ = settings(max_examples=60, deadline=None, database=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                    st.text(max_size=30), st.sampled_from(["", "0", "-1", "1e309", "\x00", "evaluate", "agent", "cpp",
                                                          "builtin", "Model", "\ud800"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                    max_leaves=12)


def payloads(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """Dicts with some of the expected fields (each a plausible value or any JSON) plus stray keys, or any JSON."""
    known = st.fixed_dictionaries({}, optional={name: st.one_of(good, JSON) for name, good in fields.items()})
    return st.one_of(st.builds(lambda a, b: {**b, **a}, known, st.dictionaries(st.text(max_size=8), JSON, max_size=2)),
                     JSON)


def _post(client, path: str, body) -> object:
    # Serialised here, not by the test client: json.dumps escapes lone surrogates (\ud800) and writes NaN and
    # Infinity, as a careless or hostile client may.
    return client.generic("POST", path, json.dumps(body), content_type="application/json")


def _assert_answered(response, ok: set[int]) -> None:
    assert response.status_code in ok or 400 <= response.status_code < 500, response.status_code
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] and isinstance(error["message"], str) and error["message"].strip()
        assert isinstance(error["fields"], dict)


@FUZZ
@given(body=payloads({"name": st.text(max_size=20), "source": st.sampled_from(["", "x = 1\n", "import torch\n"]),
                      "model_name": st.sampled_from(["Model", "1x", ""]), "shared": st.booleans()}))
def test_problem_payloads_get_an_answer_never_a_server_error(as_user, owner, body):
    _assert_answered(_post(as_user("owner"), "/api/v1/problems/", body), {201})


@FUZZ
@given(body=payloads({"problem": st.integers(-1, 5), "kind": st.sampled_from(["evaluate", "agent", "x"]),
                      "source": st.sampled_from(["", PROBLEM.read_text(), "class ModelNew: pass\n"]),
                      "backend": st.sampled_from(["", "cpp", "cuda", "nope"]),
                      "budgets": st.dictionaries(st.sampled_from(["turns", "tokens", "gpu_seconds", "x"]), SCALARS),
                      "device": st.sampled_from(["", "cpu", "cuda", "tpu"])}))
def test_run_payloads_get_an_answer_never_a_server_error(as_user, problem, body):
    _assert_answered(_post(as_user("owner"), "/api/v1/runs/", body), {201})


@FUZZ
@given(body=payloads({"problems": st.lists(st.integers(-1, 5), max_size=3),
                      "sources": st.lists(st.fixed_dictionaries({"name": st.text(max_size=8), "source": SCALARS}),
                                          max_size=2),
                      "endpoint": st.sampled_from(["", "nope", "builtin"]), "name": st.text(max_size=10)}))
def test_batch_payloads_get_an_answer_never_a_server_error(as_user, problem, body):
    _assert_answered(_post(as_user("owner"), "/api/v1/batches/", body), {201})


@FUZZ
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=100).map(str.encode)),
       path=st.sampled_from(["/api/v1/problems/", "/api/v1/runs/", "/api/v1/batches/"]))
def test_a_body_that_is_not_json_is_refused_with_the_error_format(as_user, owner, raw, path):
    try:
        json.loads(raw)
        return  # valid JSON: the tests above cover it
    except ValueError:
        pass
    response = as_user("owner").generic("POST", path, raw, content_type="application/json")
    error = response.json()["error"]
    assert response.status_code == 400 and error["message"]
    # No body at all is an empty request (its required fields are named); anything else fails to parse.
    assert error["code"] == ("parse_error" if raw else "invalid"), (raw, error)
