"""A property-based fuzz run of the live API from its own OpenAPI schema (schemathesis): every GET and POST
operation, with a real token, against daphne on the test database; no answer may be a server error."""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error

from apps.runs.models import Run
from tests import processes

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES_PER_OPERATION = 12


@pytest.fixture
def live(owner, problem, builtin_endpoint, tmp_path):
    # Something of the token's owner to find (ids 1.. are what hypothesis tries first).
    Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED)
    url, web = processes.daphne(processes.studio_env(API_THROTTLE_USER="1000000/hour"), tmp_path / "daphne.log")
    yield url, {"Authorization": f"Token {Token.objects.create(user=owner).key}"}
    processes.stop([web])


def test_the_live_api_answers_fuzzed_requests_without_a_server_error(live):
    url, headers = live
    schema = schemathesis.openapi.from_url(f"{url}/api/v1/schema/?format=json", headers=headers).include(
        method=["GET", "POST"])
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 15
    statuses: list[int] = []

    for operation in operations:
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def fuzz(case) -> None:
            response = case.call_and_validate(base_url=url, headers=headers, checks=[not_a_server_error], timeout=60)
            statuses.append(response.status_code)

        fuzz()
    # It reached the API as the token's owner: successes as well as refusals, never a 5xx.
    assert len(statuses) >= 3 * len(operations) and any(s == 200 for s in statuses) and max(statuses) < 500
