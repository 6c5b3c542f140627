"""Another user writes while a batch's sources are checked: the scenario behind test_batches'
test_another_users_writes_proceed_while_a_slow_batch_is_checked, run in the test's own process on Postgres and
in a fresh process on an embedded SQLite database (`python -m tests.apps.api.batch_lock DIR`).

The sandbox check is replaced by one that holds until the other user's write has answered (or 30 s have
passed), and records whether a transaction was open around it."""
from __future__ import annotations

import json
import threading
import time
from typing import Any
from unittest import mock

from django.db import connection

SOURCE_NAMES = ("slow_a.py", "slow_b.py")


def scenario(owner: Any, member: Any, endpoint_name: str) -> dict[str, Any]:
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    from apps.problems.models import Problem
    from apps.problems.services import sha256
    from tests.apps.cast import GOOD_CANDIDATE, PROBLEM

    source = PROBLEM.read_text()
    theirs = Problem.objects.create(owner=member, name="theirs.py", source=source, source_hash=sha256(source),
                                    validation={"ok": True})
    checking, release = threading.Event(), threading.Event()
    in_transaction: list[bool] = []

    def slow_check(source: str, names: Any, **options: Any) -> dict[str, Any]:
        in_transaction.append(connection.in_atomic_block)
        checking.set()
        release.wait(30)
        return {}

    def client(user: Any) -> Any:
        api = APIClient(raise_request_exception=False)
        api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
        return api

    owners, members = client(owner), client(member)
    batch: dict[str, Any] = {}

    def post_batch() -> None:
        try:
            response = owners.post("/api/v1/batches/", {
                "endpoint": endpoint_name, "sources": [{"name": n, "source": source} for n in SOURCE_NAMES]},
                format="json")
            batch["status"] = response.status_code
        finally:
            connection.close()

    with mock.patch("apps.problems.services.check_in_sandbox", slow_check):
        thread = threading.Thread(target=post_batch)
        thread.start()
        assert checking.wait(30), "the batch's check never started"
        started = time.monotonic()
        write = members.post("/api/v1/runs/", {"problem": theirs.pk, "kind": "evaluate",
                                                "source": GOOD_CANDIDATE.read_text()}, format="json")
        seconds = time.monotonic() - started
        release.set()
        thread.join(60)
    return {"write_status": write.status_code, "write_seconds": seconds, "batch_status": batch.get("status"),
            "checked_in_transaction": in_transaction}


def main(directory: str) -> None:
    """On a fresh embedded SQLite database under `directory` (the environment says where: SQLITE_PATH)."""
    import django
    from django.conf import settings

    django.setup()
    # A locked database fails a writer after this long rather than the default 30 s.
    settings.DATABASES["default"]["OPTIONS"]["timeout"] = 5
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from apps.endpoints.models import ModelEndpoint

    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    owner, member = users.create_user("owner"), users.create_user("member")
    endpoint = ModelEndpoint.objects.get_or_create(kind="builtin", defaults={"name": "built-in templates (no model)"})[0]
    print(json.dumps({"vendor": connection.vendor, **scenario(owner, member, endpoint.name)}))


if __name__ == "__main__":
    import sys

    main(sys.argv[1])
