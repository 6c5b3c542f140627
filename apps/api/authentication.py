"""Token authentication whose failures count against the anonymous throttle: DRF authenticates before it
throttles, so a request with a made-up token got its 401 without ever being counted, and tokens could be guessed
at any rate. A failed token now takes one request from its address's anonymous allowance; past it, 429."""
from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.request import Request

from apps.api.throttles import AnonThrottle


class ThrottledTokenAuthentication(TokenAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            throttle = AnonThrottle()
            if not throttle.allow_failed_authentication(request):
                raise exceptions.Throttled(throttle.wait()) from None
            raise
