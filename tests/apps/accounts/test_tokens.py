import pytest
from rest_framework.authtoken.models import Token

pytestmark = pytest.mark.django_db


def test_a_user_creates_replaces_and_revokes_their_api_token(client, owner):
    client.force_login(owner)
    assert "You have no token" in client.get("/accounts/tokens/").content.decode()
    client.post("/accounts/tokens/", {"action": "create"})
    first = Token.objects.get(user=owner).key
    assert first in client.get("/accounts/tokens/").content.decode()
    assert client.get("/api/v1/problems/", HTTP_AUTHORIZATION=f"Token {first}").status_code == 200
    client.post("/accounts/tokens/", {"action": "create"})
    assert Token.objects.get(user=owner).key != first
    client.post("/accounts/tokens/", {"action": "revoke"})
    assert not Token.objects.filter(user=owner).exists()
    client.logout()
    assert client.get("/api/v1/problems/", HTTP_AUTHORIZATION=f"Token {first}").status_code == 401


def test_the_token_page_needs_a_login(client):
    assert client.get("/accounts/tokens/").status_code == 302
