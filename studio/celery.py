"""The Celery app. Queues (DESIGN §6): `build` (CPU builds), `gpu` (one worker per GPU, concurrency 1),
`agent` (model calls). Workers never touch CUDA themselves: GPU work runs in the sandbox's children."""
from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

app = Celery("studio")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
