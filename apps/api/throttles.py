"""Throttles that read their rate when a request comes, not when the class is imported, so a changed
REST_FRAMEWORK setting (a test's tiny rate) takes effect. Counts live in the default cache."""
from __future__ import annotations

from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class UserThrottle(UserRateThrottle):
    def get_rate(self) -> str:
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]


class AnonThrottle(AnonRateThrottle):
    def get_rate(self) -> str:
        return api_settings.DEFAULT_THROTTLE_RATES[self.scope]
