"""Uploading a problem: read the bytes, parse (AST only, never import here), run it once in a worker's
sandbox, store. Nothing is created unless every check passes."""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from celery.exceptions import TimeoutError as NoAnswer
from kombu.exceptions import OperationalError

from agent import validation
from agent.validation import Issue, ProblemNames
from apps.problems.models import Origin, Problem

# Past the module's own limit the wait allows for a worker whose sandbox has not started yet (it imports torch).
_CHECK_GRACE_SECONDS = 30


class UploadRejected(Exception):
    """The upload cannot become a problem (or a candidate); `issues` carry line/col for the editor."""

    def __init__(self, message: str, issues: list[Issue] | None = None, source: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.issues = issues or []
        self.source = source  # what the user sent, decoded, so the page can show it back

    def issue_dicts(self) -> list[dict[str, object]]:
        return [asdict(i) for i in self.issues]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_source(upload: UploadedFile | None, pasted: str, what: str = "module") -> str:
    """The module's text from a file upload (preferred) or the editor; enforces size and UTF-8."""
    limit = settings.KSTUDIO_MAX_UPLOAD_BYTES
    if upload is not None:
        if upload.size is not None and upload.size > limit:
            raise UploadRejected(f"The file {upload.name} is {upload.size:,} bytes, over the {limit:,}-byte limit; "
                                 f"upload only the {what} itself, without embedded data.")
        raw = upload.read(limit + 1)
        if len(raw) > limit:
            raise UploadRejected(f"The file {upload.name} is over the {limit:,}-byte limit; upload only the {what} itself.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UploadRejected(f"The file {upload.name} is not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x}); "
                                 "save it as UTF-8 and upload it again.") from None
        return text.removeprefix("\ufeff")
    size = len(pasted.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        raise UploadRejected(f"The pasted {what} is {size:,} bytes, over the {limit:,}-byte limit.", source=pasted)
    if not pasted.strip():
        raise UploadRejected(f"Nothing was uploaded: choose a file or paste the {what} into the editor.")
    return pasted


def create_problem(owner: AbstractBaseUser, name: str, source: str, names: ProblemNames | None = None,
                   shared: bool = False, origin: str = Origin.UPLOADED) -> Problem:
    names = names or ProblemNames()
    report = validation.validate_problem(source, filename=name or "problem.py", names=names)
    if not report.ok:
        raise UploadRejected("The module is not a valid problem; fix the errors marked in the code and upload again.",
                             report.errors(), source)
    header = check_in_sandbox(source, names)
    return Problem.objects.create(
        owner=owner, name=(name or "problem").strip()[:200], source=source, source_hash=sha256(source),
        model_name=names.model, get_inputs_name=names.get_inputs, get_init_inputs_name=names.get_init_inputs,
        validation={**report.to_dict(), "run": {k: header.get(k) for k in ("outputs", "returns_sequence", "work",
                                                                           "toolchain", "hardware")}},
        shared=shared, origin=origin)


def check_in_sandbox(source: str, names: ProblemNames) -> dict[str, Any]:
    """Import and run the module once in a worker's sandbox (the `build` queue) and wait for the answer;
    the web process never imports it. Returns what the run learnt; raises UploadRejected otherwise."""
    from apps.problems.tasks import check_problem

    seconds = settings.KSTUDIO_PROBLEM_CHECK_SECONDS
    wait = seconds + _CHECK_GRACE_SECONDS
    try:
        pending = check_problem.apply_async((source, [names.model, names.get_inputs, names.get_init_inputs], seconds),
                                            queue="build", expires=wait)
        result = pending.get(timeout=wait, disable_sync_subtasks=False)
    except OperationalError as exc:
        raise UploadRejected(f"The problem could not be checked: the task queue is unreachable ({exc}). Nothing was "
                             "created; try again once the studio's workers are running.", source=source) from None
    except NoAnswer:
        raise UploadRejected(f"The problem could not be checked: no worker answered within {wait} s. Nothing was "
                             "created; make sure a worker serves the `build` queue and try again.", source=source) from None
    if result.get("internal"):
        raise UploadRejected(f"Checking the problem failed inside the studio ({result['error']}); nothing was created. "
                             "Try again, and tell an admin if it keeps happening.", source=source)
    if not result["ok"]:
        raise UploadRejected(f"The module was run once in the sandbox and failed, so nothing was created: "
                             f"{result['error']}\nFix the module (it must import and run `{names.model}` on "
                             f"`{names.get_inputs}()` within {seconds} s) and upload it again.", source=source)
    return result["header"]


def names_of(problem: Problem) -> ProblemNames:
    return ProblemNames(problem.model_name, problem.get_inputs_name, problem.get_init_inputs_name)
