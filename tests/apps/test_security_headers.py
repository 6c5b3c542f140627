"""Every response carries the security headers, in the development default too, which keeps working over plain
http (no redirect, no HSTS, cookies without Secure). Production's HTTPS settings: test_security_deploy.py."""
import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db


def _assert_policies(response, what):
    headers = response.headers
    assert headers["X-Content-Type-Options"] == "nosniff", what
    assert headers["Referrer-Policy"] == "same-origin", what
    assert headers["Cross-Origin-Opener-Policy"] == "same-origin", what
    assert headers["Content-Security-Policy"] == settings.CONTENT_SECURITY_POLICY, what
    assert "camera=()" in headers["Permissions-Policy"], what


def test_pages_api_and_static_files_carry_the_security_headers(client, owner):
    client.force_login(owner)
    for url in ("/accounts/login/", "/problems/", "/api/v1/problems/", "/api/v1/docs/", "/static/studio/app.css"):
        response = client.get(url)
        assert response.status_code == 200, url
        _assert_policies(response, url)
        if not url.startswith("/static/"):  # whitenoise answers files before the framing middleware; CSP covers them
            assert response.headers["X-Frame-Options"] == "DENY", url


def test_the_policy_allows_no_inline_script_and_no_framing():
    directives = dict(d.split(" ", 1) for d in settings.CONTENT_SECURITY_POLICY.split("; "))
    assert directives["script-src"] == "'self'" and directives["default-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'" and directives["object-src"] == "'none'"


def test_the_development_default_serves_plain_http(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200 and "Strict-Transport-Security" not in response.headers
    assert not response.cookies["csrftoken"]["secure"] and response.cookies["csrftoken"]["samesite"] == "Lax"


def test_the_swagger_page_loads_its_init_script_from_a_url_not_inline(client, owner):
    client.force_login(owner)
    page = client.get("/api/v1/docs/").content.decode()
    assert "<script>" not in page.replace(" ", "")
    script = client.get("/api/v1/docs/?script=")
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in script.content.decode()
