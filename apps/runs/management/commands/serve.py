"""`python manage.py serve`: the studio over daphne; in the embedded default also the Celery worker,
as threads of this same process on the in-memory broker (nothing else to start)."""
from __future__ import annotations

import os
import sys
import threading
import traceback

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve Kernel Studio (daphne); with no REDIS_URL, run the worker in this process too."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)

    def handle(self, *args: object, host: str, port: int, **options: object) -> None:
        if not settings.EMBEDDED:
            self._serve(host, port)
            return
        try:
            start_embedded_worker()
            # The in-memory broker lost whatever was queued when the studio last stopped, and this worker is no
            # Celery CLI worker, whose worker_ready signal (apps/runs/tasks.py) would re-queue it. Claims standing now
            # were made by an embedded worker that died with its studio (`make run` stopped, even in the middle of an
            # evaluation): taken over at once.
            from apps.runs.services import resume_unfinished_runs

            resumed = resume_unfinished_runs(release_claims=True)
            self.stdout.write(f"embedded worker started (queues build, gpu, agent, train; in-memory broker); "
                              f"{resumed} unfinished run(s) queued again")
            self._serve(host, port)
            code = 0
        except KeyboardInterrupt:
            code = 0  # a Ctrl-C before daphne took over the signal (while starting): stopped all the same
        except SystemExit as exc:  # daphne's own exit (a port in use...): its message is printed already
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")
        except BaseException:  # noqa: BLE001 - said, then the same exit
            traceback.print_exc()
            code = 1
        # Stopped: leave at once, as a killed worker would. Python's own shutdown would first wait for the worker's
        # pool and stop the sandbox under the evaluation in hand, failing its run; left claimed, the run is taken over
        # when the studio starts again (above).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def _serve(self, host: str, port: int) -> None:
        from daphne.cli import CommandLineInterface

        self.stdout.write(f"Kernel Studio on http://{host}:{port}/")
        CommandLineInterface().run(["-b", host, "-p", str(port), "studio.asgi:application"])


def start_embedded_worker() -> threading.Thread:
    from studio.celery import app

    # Threads, not forked children: the in-memory broker lives in this process, and nothing may fork
    # a process that could later touch CUDA. The sandbox does the isolation.
    worker = app.WorkController(pool_cls="threads", concurrency=settings.KSTUDIO_EMBEDDED_WORKER_THREADS,
                                queues=["build", "gpu", "agent", "train"], hostname="embedded@localhost", loglevel="INFO")
    thread = threading.Thread(target=worker.start, name="embedded-celery-worker", daemon=True)
    thread.start()
    return thread
