"""Response headers Django 5.2 does not set itself: Content-Security-Policy and Permissions-Policy
(the others — X-Frame-Options, nosniff, Referrer-Policy, COOP, HSTS — come from Django's own middleware)."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.deprecation import MiddlewareMixin


class SecurityHeadersMiddleware(MiddlewareMixin):
    """Adds the policies to every response that does not carry its own (MiddlewareMixin: sync and async)."""

    def process_response(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        return response
