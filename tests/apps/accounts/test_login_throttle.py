"""Password logins are throttled (django-axes, studio/settings.py): after KSTUDIO_LOGIN_FAILURE_LIMIT failures for a
username from one address, that pair is locked out, the right password included, on the studio's login page and
on the admin's, with a 429 page that says why and for how long."""
from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

pytestmark = pytest.mark.django_db


def _fail(client: Client, url: str, username: str, times: int) -> list[int]:
    return [client.post(url, {"username": username, "password": "wrong-password"}).status_code for _ in range(times)]


@pytest.mark.parametrize("url, who, password", [("/accounts/login/", "owner", "owner-pass-123"),
                                                ("/admin/login/", "staff", "staff-pass-123")])
def test_it_locks_a_username_out_after_the_failure_limit_even_with_the_right_password(request, url, who, password):
    request.getfixturevalue(who)
    client = Client()
    limit = settings.AXES_FAILURE_LIMIT
    codes = _fail(client, url, who, limit)
    assert codes[:-1] == [200] * (limit - 1) and codes[-1] == 429
    response = client.post(url, {"username": who, "password": password})
    page = response.content.decode()
    assert response.status_code == 429 and "Too many login attempts" in page and f"failed\n{limit} times" in page
    assert "0:15:00" in page and "_auth_user_id" not in client.session


def test_a_lockout_is_per_username_and_address_and_a_success_resets_the_count(owner, member):
    client = Client()
    limit = settings.AXES_FAILURE_LIMIT
    _fail(client, "/accounts/login/", "owner", limit - 1)
    assert client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"}).status_code == 302
    client.logout()
    _fail(client, "/accounts/login/", "owner", limit - 1)  # counted afresh after the success: not locked yet
    assert client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"}).status_code == 302
    client.logout()
    assert _fail(client, "/accounts/login/", "owner", limit)[-1] == 429
    assert Client().post("/accounts/login/", {"username": "member", "password": "member-pass-123"}).status_code == 302
    elsewhere = Client(REMOTE_ADDR="10.0.0.9")
    assert elsewhere.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"}).status_code == 302


def test_a_forwarded_address_does_not_reset_the_count(owner):
    """X-Forwarded-For is ignored unless TRUST_X_FORWARDED_FOR says a proxy sets it."""
    client = Client()
    for i in range(settings.AXES_FAILURE_LIMIT):
        client.post("/accounts/login/", {"username": "owner", "password": "wrong"}, HTTP_X_FORWARDED_FOR=f"10.1.0.{i}")
    response = client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"},
                           HTTP_X_FORWARDED_FOR="10.1.0.99")
    assert response.status_code == 429
