import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def tiny_rates(settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"user": "3/min", "anon": "2/min"}}


def test_it_throttles_a_user_past_the_rate_with_the_error_format(as_user, tiny_rates):
    client = as_user("owner")
    assert [client.get("/api/v1/problems/").status_code for _ in range(3)] == [200, 200, 200]
    response = client.get("/api/v1/problems/")
    assert response.status_code == 429 and response.json()["error"]["code"] == "throttled"
    assert "Retry-After" in response.headers and "Too many requests" in response.json()["error"]["message"]
    assert as_user("member").get("/api/v1/problems/").status_code == 200  # counted per user


def test_it_throttles_anonymous_clients_on_public_endpoints(as_user, tiny_rates):
    # Everything but the schema and docs needs a token (401 before any throttle); the schema is public.
    codes = [as_user(None).get("/api/v1/schema/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_made_up_tokens_count_against_the_anonymous_throttle(tiny_rates):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    codes = [client.get("/api/v1/problems/").status_code for _ in range(3)]
    assert codes == [401, 401, 429]
    response = client.get("/api/v1/runs/")
    assert response.status_code == 429 and response.json()["error"]["code"] == "throttled"
    assert "Retry-After" in response.headers
    # One counter per address: an anonymous request from it is throttled too.
    assert APIClient().get("/api/v1/schema/").status_code == 429


def test_a_valid_token_is_not_counted_as_anonymous(as_user, tiny_rates):
    from rest_framework.test import APIClient

    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION="Token nope")
    assert [bad.get("/api/v1/problems/").status_code for _ in range(3)] == [401, 401, 429]
    assert as_user("owner").get("/api/v1/problems/").status_code == 200
