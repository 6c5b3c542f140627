"""The Django project: settings from the environment, URLs, ASGI with Channels, the Celery app."""
from studio.celery import app as celery_app

__all__ = ["celery_app"]
