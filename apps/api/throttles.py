"""Throttles that read their rate when a request comes, not when the class is imported, so a changed
REST_FRAMEWORK setting (a test's tiny rate) takes effect. Counts live in the default cache."""
from __future__ import annotations

from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class UserThrottle(UserRateThrottle):
    def get_rate(self) -> str:
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]


class AnonThrottle(AnonRateThrottle):
    def get_rate(self) -> str:
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]

    def allow_failed_authentication(self, request: Request) -> bool:
        """Count a request whose credentials failed as an anonymous one from its address (the same counter).
        Called while DRF authenticates, before request.user exists, so the key is made here."""
        if self.rate is None:
            return True
        self.key = self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) >= self.num_requests:
            return self.throttle_failure()
        return self.throttle_success()
