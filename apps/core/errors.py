"""The studio's one domain error (DESIGN §9: one exception type per boundary, translated in one place).

A service raises `Refused` when what the user asked cannot be done as asked: an upload that is not a valid module,
a budget that is not a number, an unknown device, a batch too large, a quota spent, a deletion that would take other
users' work. Its message says what was wrong and what to do. The API translates it in apps/api/errors.py, the HTML
pages in `shows_refusals` below; `status` and `code` are the HTTP status and the API's error code for both."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse

from agent.engine import Issue


class Refused(Exception):
    """The request cannot be done as asked; `issues` carry line/col for the editor, `source` what the user sent
    (decoded), so the page can show it back."""

    status = 400
    code = "rejected"

    def __init__(self, message: str, issues: list[Issue] | None = None, source: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.issues = issues or []
        self.source = source

    def issue_dicts(self) -> list[dict[str, object]]:
        return [asdict(i) for i in self.issues]

    def details(self) -> dict[str, Any]:
        """What the API's error body carries besides code and message."""
        return {"issues": self.issue_dicts()}


class QuotaExceeded(Refused):
    """Starting the run would pass one of the user's quotas (apps/runs/quotas.py)."""

    status = 429
    code = "quota_exceeded"

    def details(self) -> dict[str, Any]:
        return {}


class InUse(Refused):
    """Deleting it would delete work that is not its owner's, or break a batch's report."""

    status = 409
    code = "in_use"

    def details(self) -> dict[str, Any]:
        return {}


class NotThere(Refused):
    """A part of a visible object that does not exist (a run's candidate by turn); the message says what does."""

    status = 404
    code = "not_found"

    def details(self) -> dict[str, Any]:
        return {}


# A page that shows a refusal: the view's own page again, with the message (and the editor's markers), answered with
# the refusal's status.
RefusalPage = Callable[..., HttpResponse]


def shows_refusals(page: RefusalPage) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Translate a view's `Refused` into `page(request, refusal, **view_kwargs)` (answered with `refusal.status`): the one place HTML views turn
    the domain error into a response."""
    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except Refused as refusal:
                return page(request, refusal, *args, **kwargs)
        return wrapped
    return decorate
