import pytest

from apps.kernels.services import render_module

pytestmark = pytest.mark.django_db


def test_it_filters_kernels_by_problem_hash_speedup_and_hardware(as_user, made):
    client = as_user("owner")
    problem_hash = made["problem"].source_hash
    assert client.get(f"/api/v1/kernels/?problem_hash={problem_hash}").json()["count"] == 1
    assert client.get("/api/v1/kernels/?problem_hash=ffff").json()["count"] == 0
    assert client.get("/api/v1/kernels/?min_speedup=1.5").json()["count"] == 1
    assert client.get("/api/v1/kernels/?min_speedup=2").json()["count"] == 0
    assert client.get("/api/v1/kernels/?hardware=cpu 9000").json()["count"] == 1
    assert client.get("/api/v1/kernels/?hardware=H100").json()["count"] == 0
    assert client.get("/api/v1/kernels/?device=cpu&backend=cpp&ordering=-speedup").json()["count"] == 1
    assert client.get("/api/v1/kernels/?min_speedup=fast").json()["error"]["code"] == "invalid"


def test_its_detail_carries_the_provenance(as_user, made):
    body = as_user("owner").get(f"/api/v1/kernels/{made['kernel'].pk}/").json()
    assert body["source"] == made["kernel"].source and body["produced_by"] == "owner" and body["run"] == made["run"].pk
    assert body["hardware"] == {"cpu": "Test CPU 9000"} and "trajectory" in body and "verification" in body


def test_it_downloads_the_module_with_its_header(as_user, made):
    response = as_user("owner").get(f"/api/v1/kernels/{made['kernel'].pk}/download/")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/x-python")
    assert response.content.decode() == render_module(made["kernel"])
    assert 'filename="silu_bias_kernel_' in response["Content-Disposition"]


def test_it_lists_only_enabled_endpoints(as_user):
    from apps.endpoints.models import ModelEndpoint

    ModelEndpoint.objects.create(name="off", kind="builtin", enabled=False)
    names = [e["name"] for e in as_user("stranger").get("/api/v1/endpoints/").json()["results"]]
    assert "off" not in names and ModelEndpoint.objects.get(kind="builtin", enabled=True).name in names
