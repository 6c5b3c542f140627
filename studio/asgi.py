"""ASGI entry point: HTTP goes to Django (its body size capped first), websockets to Channels consumers
(only from our own origin, with the session's user; each consumer checks who may watch)."""
from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
django_asgi_app = get_asgi_application()  # before importing consumers: it sets Django up

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from apps.runs.routing import websocket_urlpatterns  # noqa: E402
from studio.body_limit import BodySizeLimit  # noqa: E402
from studio.ws_origin import SameOriginValidator  # noqa: E402

application = ProtocolTypeRouter({
    "http": BodySizeLimit(django_asgi_app, settings.KSTUDIO_MAX_REQUEST_BYTES),
    # An Origin other than our own (scheme, host and port, as the CSRF check) is refused at the handshake:
    # cross-site websocket hijacking rides on the session cookie.
    "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
