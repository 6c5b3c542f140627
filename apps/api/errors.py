"""The API's one error format, translated here for every endpoint (DESIGN §9: one exception type per
boundary, translated in one place):

    {"error": {"code": "invalid", "message": "what was wrong and what to do", "fields": {"name": ["..."]}}}

`fields` is empty unless the request had field errors; a rejected upload adds `issues` (line/col)."""
from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import ProtectedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from apps.problems.services import UploadRejected

MESSAGES = {
    "not_authenticated": "Send a token: `Authorization: Token <key>` (make one on /accounts/tokens/).",
    "authentication_failed": "The token is not valid; make a new one on /accounts/tokens/.",
    "not_found": "There is no such object, or it is not shared with you.",
    "permission_denied": "Only the owner (or staff) may change this.",
}


def error(code: str, message: str, fields: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}, **extra}}


def handle(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, UploadRejected):
        return Response(error("rejected", exc.message, issues=exc.issue_dicts()), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ProtectedError):
        used_by = sorted({str(obj._meta.verbose_name) for obj in exc.protected_objects})
        return Response(error("in_use", f"It is still used by {', '.join(used_by)}; delete those first."),
                        status=status.HTTP_409_CONFLICT)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = exception_handler(exc, context)
    if response is None:
        return None  # our bug: a 500, logged by Django
    if isinstance(exc, exceptions.ValidationError):
        fields = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        summary = "; ".join(f"{name}: {' '.join(map(str, _flat(value)))}" for name, value in fields.items())
        response.data = error("invalid", f"The request has invalid fields; fix them and send it again ({summary}).",
                              fields)
        return response
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else "error"
    detail = exc.detail if isinstance(exc.detail, str) else str(exc)
    message = MESSAGES.get(code, str(detail))
    if code == "permission_denied" and str(detail).startswith("CSRF Failed"):
        # A session-authenticated write without the CSRF token (SessionAuthentication): not an ownership problem.
        code, message = "csrf_failed", (f"{detail} A logged-in browser sends the X-CSRFToken header (the csrftoken "
                                        "cookie's value); scripts authenticate with `Authorization: Token <key>` instead.")
    if code == "throttled":
        message = f"Too many requests; {detail}"
    response.data = error(code, message)
    return response


def _flat(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [f"{k}: {' '.join(map(str, _flat(v)))}" for k, v in value.items()]
    if isinstance(value, list):
        return [item for v in value for item in _flat(v)]
    return [value]
