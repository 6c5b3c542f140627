"""The websocket handshake's Origin check, made as strict as Django's CSRF check of a form: the Origin must be the
studio's own origin as this request reached it (scheme, host and port: http://127.0.0.1:9999 is not
http://127.0.0.1:8000) or one listed in CSRF_TRUSTED_ORIGINS, and the Host must be one of ALLOWED_HOSTS. Channels'
AllowedHostsOriginValidator compares the host alone, so a page on another port of the same host, or plain http on
an https studio, could open a user's run socket with their cookie."""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain


def allowed_origin(scope: dict[str, Any]) -> bool:
    headers = {name.lower(): value.decode("latin1") for name, value in scope.get("headers", [])}
    origin, host = headers.get(b"origin"), headers.get(b"host")
    if not origin or not host or origin == "null":
        return False
    domain, _port = split_domain_port(host)
    allowed_hosts = settings.ALLOWED_HOSTS or ([".localhost", "127.0.0.1", "[::1]"] if settings.DEBUG else [])
    if not domain or not validate_host(domain, allowed_hosts):
        return False
    if origin == f"{'https' if _secure(scope, headers) else 'http'}://{host}":
        return True
    if origin in settings.CSRF_TRUSTED_ORIGINS:
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    # CSRF_TRUSTED_ORIGINS' wildcards (https://*.example.com), matched as Django's CSRF check does.
    return any(is_same_domain(parsed.netloc, urlsplit(trusted).netloc.removeprefix("*"))
               for trusted in settings.CSRF_TRUSTED_ORIGINS
               if "*" in trusted and urlsplit(trusted).scheme == parsed.scheme)


def _secure(scope: dict[str, Any], headers: dict[bytes, str]) -> bool:
    if scope.get("scheme") in ("wss", "https"):
        return True
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:  # ("HTTP_X_FORWARDED_PROTO", "https"): trusted only where settings say a TLS proxy sets it
        name = proxy[0].removeprefix("HTTP_").replace("_", "-").lower().encode()
        return headers.get(name, "").split(",")[0].strip() == proxy[1]
    return False


class SameOriginValidator:
    """ASGI middleware: a websocket whose Origin fails allowed_origin() is refused at the handshake (403)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not allowed_origin(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.application(scope, receive, send)
