"""`manage.py ensure_admin` (apps/accounts/management/commands/ensure_admin.py)."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_it_prints_the_address_serve_will_listen_on(monkeypatch):
    out = StringIO()
    call_command("ensure_admin", "--host", "0.0.0.0", "--port", "8123", stdout=out)
    assert "http://0.0.0.0:8123/" in out.getvalue() and "8000" not in out.getvalue()


def test_without_options_it_reads_the_port_from_the_environment(monkeypatch):
    monkeypatch.setenv("PORT", "9001")
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    assert "http://127.0.0.1:9001/" in out.getvalue()
