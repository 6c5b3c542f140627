"""The kernel library pages and exports (apps/kernels/views.py)."""
from __future__ import annotations

import io
import json
import zipfile

import pytest

from tests.apps.runs.pages import finished_run  # noqa: F401

pytestmark = pytest.mark.django_db


def test_it_lists_kernels_with_sortable_columns_and_filters(client, owner, finished_run):
    client.force_login(owner)
    page = client.get("/kernels/").content.decode()
    assert page.count('class="sortable"') == 9 and 'id="filter-backend"' in page
    assert 'data-hardware="x86_64"' in page and f'href="/kernels/problem/{finished_run["kernel"].problem_id}/"' in page


def test_it_ranks_a_problems_kernels_per_hardware(client, owner, finished_run):
    client.force_login(owner)
    response = client.get(f"/kernels/problem/{finished_run['kernel'].problem_id}/")
    [(hardware, kernels)] = response.context["groups"]
    assert hardware == "x86_64" and kernels == [finished_run["kernel"]]


def test_it_shows_the_provenance_with_toolchain_hardware_trajectory_and_evidence(client, owner, finished_run):
    client.force_login(owner)
    page = client.get(finished_run["kernel"].get_absolute_url()).content.decode()
    for fact in ("torch_version", "2.13.0+cpu", "x86_64", "policy scripted", 'id="trajectory"', "Trying a fused loop.",
                 "noisy_timing</code>", 'id="download-package"'):
        assert fact in page, fact


def test_it_exports_a_package_whose_metadata_carries_the_stored_verdict(client, owner, finished_run):
    client.force_login(owner)
    kernel = finished_run["kernel"]
    response = client.get(f"/kernels/{kernel.pk}/package/")
    assert response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        [meta_path] = [n for n in archive.namelist() if n.endswith("kstudio.json")]
        meta = json.loads(archive.read(meta_path))
    assert meta["kernel_sha256"] == kernel.source_hash and meta["summary"]["trials"] == 3
    assert meta["studio_url"].endswith(f"/kernels/{kernel.pk}/") and meta["summary"]["weights"] == "copied"


def test_it_hides_a_private_kernels_exports_from_a_stranger(client, stranger, finished_run):
    client.force_login(stranger)
    pk = finished_run["kernel"].pk
    assert client.get(f"/kernels/{pk}/package/").status_code == 404
    assert client.get(f"/kernels/{pk}/diff/").status_code == 404
