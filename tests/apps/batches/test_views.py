"""The batch pages (apps/batches/views.py)."""
from __future__ import annotations

import pytest

from tests.apps.batches.test_services import _stored_batch

pytestmark = pytest.mark.django_db


def test_the_batch_list_links_each_batch_with_its_progress(client, owner, builtin_endpoint):
    batch = _stored_batch(owner, [("accepted", 2.0, None), None], builtin_endpoint)
    client.force_login(owner)
    page = client.get("/batches/").content.decode()
    assert f'href="/batches/{batch.pk}/"' in page and "1/2" in page and 'href="/batches/"' in page  # and in the nav


def test_a_batch_page_shows_progress_per_problem_the_report_fast_p_and_downloads(client, owner, builtin_endpoint):
    batch = _stored_batch(owner, [("accepted", 2.0, None), ("incorrect", 5.0, 5.0), None], builtin_endpoint)
    client.force_login(owner)
    page = client.get(f"/batches/{batch.pk}/").content.decode()
    assert 'id="batch-progress">2/3<' in page and 'data-status="running"' in page
    assert '<td class="run-stage">build</td>' in page  # the unfinished run's stage, before any verdict
    assert '<td data-fast="1">33%</td>' in page and "2.00x" in page
    assert f'href="/api/v1/batches/{batch.pk}/report/?format=csv"' in page
    assert client.get(f"/api/v1/batches/{batch.pk}/report/?format=csv").status_code == 200


def test_a_strangers_batch_page_is_not_found(client, owner, stranger, builtin_endpoint):
    batch = _stored_batch(owner, [None], builtin_endpoint)
    client.force_login(stranger)
    assert client.get(f"/batches/{batch.pk}/").status_code == 404
    assert f"/batches/{batch.pk}/" not in client.get("/batches/").content.decode()


def test_the_api_batch_says_each_runs_stage_from_the_start(client, owner, builtin_endpoint):
    batch = _stored_batch(owner, [None], builtin_endpoint)
    client.force_login(owner)
    [run] = client.get(f"/api/v1/batches/{batch.pk}/").json()["runs"]
    assert run["status"] == "running" and run["stage"] == "build" and run["candidates"] == 0 and run["problem_name"] == "p0.py"
