import pytest

pytestmark = pytest.mark.django_db


def test_it_logs_a_user_in_and_out(client, owner):
    response = client.post("/accounts/login/", {"username": "owner", "password": "owner-pass-123"})
    assert response.status_code == 302
    assert client.get("/problems/").status_code == 200
    client.post("/accounts/logout/")
    assert client.get("/problems/").status_code == 302


def test_it_keeps_signup_closed_unless_the_setting_opens_it(client, settings, django_user_model):
    assert client.get("/accounts/signup/").status_code == 404
    settings.KSTUDIO_SIGNUP_OPEN = True
    response = client.post("/accounts/signup/", {"username": "newbie", "password1": "a-long-pass-9876",
                                                 "password2": "a-long-pass-9876"})
    assert response.status_code == 302 and django_user_model.objects.filter(username="newbie").exists()


def test_a_wrong_password_shows_one_message(client, owner):
    page = client.post("/accounts/login/", {"username": "owner", "password": "wrong"}).content.decode()
    assert page.count('class="error"') == 1 and page.count("errorlist") == 0 and 'id="login-error"' in page
