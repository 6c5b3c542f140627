import re
import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db


def test_the_openapi_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    for path in ("/api/v1/problems/", "/api/v1/runs/{id}/events/", "/api/v1/kernels/{id}/download/",
                 "/api/v1/batches/{id}/report/", "/api/v1/endpoints/"):
        assert f"  {path}:" in text, path


def test_the_docs_are_served_from_our_own_static_files(client):
    for url in ("/api/v1/docs/", "/api/v1/redoc/"):
        page = client.get(url).content.decode()
        assert "/static/drf_spectacular_sidecar/" in page, url
        # Every script, style and link comes from our own origin (a random token may contain "cdn": look
        # at the URLs, not at the text).
        assets = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']+)', page)
        assert assets and all(a.startswith("/") and not a.startswith("//") for a in assets), (url, assets)
        assert not re.search(r"//cdn[.\w-]*\.", page), url
    assert client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()["info"]["title"] == \
        "Kernel Studio API"
