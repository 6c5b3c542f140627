"""The API refuses a module over KSTUDIO_MAX_UPLOAD_BYTES (counted in UTF-8 bytes) with its size and the limit,
in every payload that carries one; nothing is created."""
import json

import pytest

from apps.problems.models import Problem
from apps.runs.models import Run
from tests.apps.test_security_limits import LIMIT, _oversized, small_limit  # noqa: F401

@pytest.mark.django_db
def test_the_api_refuses_an_oversized_module_naming_its_size_and_the_limit(as_user, small_limit, problem):
    client = as_user("owner")
    response = client.post("/api/v1/problems/", {"name": "big.py", "source": _oversized()}, format="json")
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "invalid"
    assert error["fields"]["source"] == [f"The module is {LIMIT + 1:,} bytes, over the {LIMIT:,}-byte limit; send only "
                                         "the module itself, without embedded data."]
    response = client.post("/api/v1/runs/", {"problem": problem.pk, "kind": "evaluate", "source": _oversized()},
                           format="json")
    assert response.status_code == 400 and "1,000-byte limit" in response.json()["error"]["fields"]["source"][0]
    response = client.post("/api/v1/batches/", {"sources": [{"name": "b.py", "source": _oversized()}], "endpoint": "x"},
                           format="json")
    assert "1,000-byte limit" in json.dumps(response.json()["error"]["fields"]["sources"])
    assert Problem.objects.count() == 1 and not Run.objects.exists()


@pytest.mark.django_db
def test_the_limit_counts_utf8_bytes_not_characters(as_user, small_limit):
    source = "# " + "é" * 600  # 602 characters, 1,202 bytes
    response = as_user("owner").post("/api/v1/problems/", {"source": source}, format="json")
    assert "1,202 bytes" in response.json()["error"]["fields"]["source"][0]
