"""The API's one error format, translated here for every endpoint (DESIGN §9: one exception type per
boundary, translated in one place):

    {"error": {"code": "invalid", "message": "what was wrong and what to do", "fields": {"name": ["..."]}}}

`fields` is empty unless the request had field errors; a rejected upload adds `issues` (line/col)."""
from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import ProtectedError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from apps.core.errors import Refused

logger = logging.getLogger("django.request")
SERVER_ERROR = ("server_error", "The studio failed to answer this request; it is logged. Try again, and tell an admin "
                                "if it keeps happening.")
MESSAGES = {
    "not_authenticated": "Send a token: `Authorization: Token <key>` (make one on /accounts/tokens/).",
    "authentication_failed": "The token is not valid; make a new one on /accounts/tokens/.",
    "not_found": "There is no such object, or it is not shared with you.",
    "permission_denied": "Only the owner (or staff) may change this.",
}


def error(code: str, message: str, fields: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "fields": fields or {}, **extra}}


def handle(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, Refused):
        return Response(error(exc.code, exc.message, **exc.details()), status=exc.status)
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
        # Our bug: logged with its traceback as Django logs a 500, answered in the API's format (not an HTML page).
        request = context.get("request")
        logger.error("Internal Server Error: %s", getattr(request, "path", "?"), exc_info=exc,
                     extra={"status_code": 500, "request": getattr(request, "_request", None)})
        set_rollback()
        return Response(error(*SERVER_ERROR), status=status.HTTP_500_INTERNAL_SERVER_ERROR)
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


# Django's error views (studio/urls.py): under /api/ they answer in the API's format too, for what never reached a
# DRF view (an unknown path, a request Django refused, a failure in middleware).

def _api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return JsonResponse(error("not_found", "There is no such resource; the API's paths are listed at "
                                               "/api/v1/docs/."), status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return JsonResponse(error("bad_request", "The request could not be read (a malformed or oversized part, or a "
                                                 "host name this studio does not serve)."), status=400)
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _api(request):
        return JsonResponse(error(*SERVER_ERROR), status=500)
    return defaults.server_error(request)
