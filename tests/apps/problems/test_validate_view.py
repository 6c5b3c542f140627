"""The editor's check as you type (POST /problems/validate/): the upload's static validation, AST only, as JSON
issues with their lines; a candidate is checked against a problem the user can see."""
from __future__ import annotations

import json

import pytest

from tests.apps.cast import GOOD_CANDIDATE

pytestmark = pytest.mark.django_db


def check(client, **body):
    return client.post("/problems/validate/", json.dumps(body), content_type="application/json")


def test_a_problem_with_a_syntax_error_gets_the_error_on_its_line(client, owner):
    client.force_login(owner)
    found = check(client, source="import torch\ndef get_inputs(:\n    return []\n", kind="problem").json()
    assert not found["ok"] and [i["line"] for i in found["issues"] if i["severity"] == "error"] == [2]
    assert check(client, source=(GOOD_CANDIDATE.parent.parent / "problems" / "elementwise_silu_bias.py").read_text(),
                 kind="problem").json() == {"ok": True, "issues": []}


def test_a_problem_with_other_names_is_checked_with_them(client, owner):
    client.force_login(owner)
    source = ("import torch\nimport torch.nn as nn\nclass Net(nn.Module):\n    def forward(self, x):\n        return x\n"
              "def inputs():\n    return [torch.randn(2)]\ndef init_inputs():\n    return []\n")
    assert not check(client, source=source, kind="problem").json()["ok"]
    named = check(client, source=source, kind="problem", names={"model": "Net", "get_inputs": "inputs",
                                                               "get_init_inputs": "init_inputs"}).json()
    assert named["ok"], named
    bad = check(client, source=source, kind="problem", names={"model": "not a name"}).json()
    assert not bad["ok"] and "not a Python identifier" in bad["issues"][0]["message"]


def test_a_candidate_is_checked_against_a_problem_the_user_can_see(client, owner, stranger, problem):
    client.force_login(owner)
    good = check(client, source=GOOD_CANDIDATE.read_text(), kind="candidate", problem=problem.pk).json()
    assert good["ok"], good
    wrong = check(client, source="import torch\nclass Model:\n    pass\n", kind="candidate", problem=problem.pk).json()
    assert not wrong["ok"] and any("ModelNew" in i["message"] for i in wrong["issues"])
    client.force_login(stranger)
    assert check(client, source=GOOD_CANDIDATE.read_text(), kind="candidate", problem=problem.pk).status_code == 404


def test_bad_requests_say_what_to_send_and_strangers_must_log_in(client, owner):
    assert check(client, source="x = 1", kind="problem").status_code == 302  # to the login page
    client.force_login(owner)
    assert client.post("/problems/validate/", "{not json", content_type="application/json").status_code == 400
    assert check(client, source=1, kind="problem").status_code == 400
    assert "send \"problem\"" in check(client, source="x", kind="candidate").json()["error"]
    huge = check(client, source="x = 1\n" * 200_000, kind="problem").json()
    assert not huge["ok"] and "over 1000000 bytes" in huge["issues"][0]["message"]
    assert client.get("/problems/validate/").status_code == 405
