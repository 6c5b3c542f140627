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


def test_every_export_of_a_kernel_runs_nothing_but_the_kernel_whatever_the_problem_is_named(client, owner, tmp_path):
    """The .py download, the API's download and the package, for problems named to break out of a comment or a
    docstring: importing each export runs the kernel's own module and no payload from the name."""
    from rest_framework.authtoken.models import Token

    from apps.kernels.services import keep_accepted
    from apps.problems.models import Problem
    from apps.problems.services import sha256
    from apps.runs.models import Candidate, Run
    from tests.agent.export.hostile_exports import (hostile_texts, import_modules, install_and_import_packages,
                                             kernel_source)
    from tests.apps.cast import PROBLEM
    from tests.apps.runs.pages import VERDICT

    injected, kernel_ran = tmp_path / "injected", tmp_path / "kernel_ran"
    texts = hostile_texts(injected, nul=False)  # Postgres stores no NUL; tests/agent/export/test_packaging.py has it
    source = kernel_source(kernel_ran)
    kernels = []
    for text in texts:
        problem = Problem.objects.create(owner=owner, name=text, source=PROBLEM.read_text(),
                                         source_hash=sha256(PROBLEM.read_text()), validation={})
        run = Run.objects.create(problem=problem, owner=owner, status=Run.Status.FINISHED, config={"model": text})
        candidate = Candidate.objects.create(run=run, turn=1, source=source, source_hash=sha256(source), backend="cpp",
                                             verdict={**VERDICT, "hardware": {"gpu": text}})
        kernels.append(keep_accepted(candidate))
    client.force_login(owner)
    token = Token.objects.create(user=owner).key
    modules, zips, packages = [], [], []
    for kernel in kernels:
        for where, response in (("page", client.get(f"/kernels/{kernel.pk}/download/")),
                                ("api", client.get(f"/api/v1/kernels/{kernel.pk}/download/",
                                                   HTTP_AUTHORIZATION=f"Token {token}"))):
            assert response.status_code == 200
            modules.append(tmp_path / f"{where}_{kernel.pk}.py")
            modules[-1].write_bytes(response.content)
        response = client.get(f"/kernels/{kernel.pk}/package/")
        assert response.status_code == 200
        zips.append(tmp_path / f"package_{kernel.pk}.zip")
        zips[-1].write_bytes(response.content)
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            packages.append(archive.namelist()[0].split("/")[0].split("-")[0])
    module_facts = import_modules(modules, tmp_path)
    assert kernel_ran.exists() and not injected.exists(), "a downloaded module ran code from a problem's name"
    assert [m["problem_name"] for m in module_facts] == [t for t in texts for _ in range(2)]
    kernel_ran.unlink()
    found = install_and_import_packages(zips, packages, tmp_path)
    assert kernel_ran.exists() and not injected.exists(), "an exported package ran code from a problem's name"
    assert [p["problem_name"] for p in found] == texts
