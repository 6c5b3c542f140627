from django.urls import path, re_path

from apps.runs.consumers import NoSuchSocket, RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
    re_path(r"", NoSuchSocket.as_asgi()),  # any other path: refused at the handshake, not a server error
]
