"""KSTUDIO_ENV=production: `manage.py check --deploy` is clean, HTTPS is enforced with HSTS and secure cookies,
and a missing SECRET_KEY, ALLOWED_HOSTS or a DEBUG left on stops the studio with a message saying what to set.
Each case is a fresh process: settings are read once, at start."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys

import pytest

from tests.processes import ROOT

# Real processes (the agent's CLI, pip, a production Django): the slow tier.
pytestmark = pytest.mark.slow

HOST = "studio.example.com"

# Run in a production process: plain http, https and a proxied request, each as the response's status and headers.
PROBE = """
import json, django
django.setup()
from django.test import Client
client = Client(HTTP_HOST="studio.example.com")
def seen(response):
    cookie = response.cookies.get("csrftoken")
    return {"status": response.status_code, "headers": dict(response.headers),
            "csrf_cookie_secure": bool(cookie and cookie["secure"])}
print(json.dumps({"http": seen(client.get("/accounts/login/")),
                  "https": seen(client.get("/accounts/login/", secure=True)),
                  "proxied": seen(client.get("/accounts/login/", HTTP_X_FORWARDED_PROTO="https"))}))
"""


def _production_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DEBUG", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "KSTUDIO_PASSWORD_HASHERS")}
    return {**env, "DJANGO_SETTINGS_MODULE": "studio.settings", "KSTUDIO_ENV": "production",
            "SECRET_KEY": secrets.token_urlsafe(60), "ALLOWED_HOSTS": HOST,
            "CSRF_TRUSTED_ORIGINS": f"https://{HOST}", **extra}


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_production_refuses_the_tests_fast_password_hasher():
    result = _run(["manage.py", "check"], _production_env(KSTUDIO_PASSWORD_HASHERS=os.environ["KSTUDIO_PASSWORD_HASHERS"]))
    assert result.returncode != 0 and "refuses an MD5 password hasher" in result.stderr


def test_check_deploy_reports_nothing_under_production_settings():
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], _production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


def test_check_deploy_does_warn_under_the_development_default():
    # The same command is not blind: the plain-http default lacks HSTS, the redirect and secure cookies.
    env = {k: v for k, v in _production_env().items() if k != "KSTUDIO_ENV"}
    result = _run(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode != 0
    for code in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert code in result.stderr + result.stdout, code


def test_production_redirects_to_https_and_sends_hsts_and_secure_cookies():
    result = _run(["-c", PROBE], _production_env(TRUST_X_FORWARDED_PROTO="true"))
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["http"]["status"] == 301 and seen["http"]["headers"]["Location"] == f"https://{HOST}/accounts/login/"
    for how in ("https", "proxied"):
        headers = seen[how]["headers"]
        assert seen[how]["status"] == 200, how
        assert headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload", how
        assert headers["X-Frame-Options"] == "DENY" and headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "same-origin" and "script-src 'self'" in headers["Content-Security-Policy"]
        assert seen[how]["csrf_cookie_secure"], how


@pytest.mark.parametrize("unset, wrong, says", [
    ("SECRET_KEY", {}, "needs SECRET_KEY"),
    ("", {"SECRET_KEY": "short"}, "needs SECRET_KEY"),
    ("ALLOWED_HOSTS", {}, "needs ALLOWED_HOSTS"),
    ("", {"DEBUG": "true"}, "needs DEBUG off"),
    ("", {"KSTUDIO_ENV": "prod"}, "KSTUDIO_ENV must be development or production"),
])
def test_production_refuses_to_start_without_what_it_needs(unset, wrong, says):
    env = {k: v for k, v in _production_env(**wrong).items() if k != unset}
    result = _run(["manage.py", "check"], env)
    assert result.returncode != 0 and "ImproperlyConfigured" in result.stderr and says in result.stderr
