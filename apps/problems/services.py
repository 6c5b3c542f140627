"""Uploading a problem: read the bytes, parse (AST only, never import here), run it once in a worker's
sandbox, store. Nothing is created unless every check passes."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from celery.exceptions import TimeoutError as NoAnswer
from kombu.exceptions import OperationalError

from agent.engine import validation
from agent.engine import Issue, ProblemNames
from apps.core.errors import InUse, Refused
from apps.problems.footprint import input_bytes as footprint_of
from agent.engine.memory_text import ran_out_of_memory
from apps.problems.footprint import memory_limit, too_big, too_big_traced
from apps.problems.models import Origin, Problem
from apps.problems.tasks import check_problem as check_task

# Past the module's own limit the wait allows for a worker whose sandbox has not started yet (it imports torch).
_CHECK_GRACE_SECONDS = 30


def first_error(issues: list[Issue]) -> str:
    """The first of a report's errors (its message names the file and line and says what to do), standing alone for
    an API client that has no editor to mark it in, with how many others come with it."""
    more = f" ({len(issues) - 1} more error{'s' if len(issues) > 2 else ''} listed with it.)" if len(issues) > 1 else ""
    return issues[0].message.rstrip(".") + "." + more


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_source(upload: UploadedFile | None, pasted: str, *, what: str = "module") -> str:
    """The module's text from a file upload (preferred) or the editor; enforces size and UTF-8."""
    limit = settings.KSTUDIO_MAX_UPLOAD_BYTES
    if upload is not None:
        if upload.size is not None and upload.size > limit:
            raise Refused(f"The file {upload.name} is {upload.size:,} bytes, over the {limit:,}-byte limit; "
                          f"upload only the {what} itself, without embedded data.")
        raw = upload.read(limit + 1)
        if len(raw) > limit:
            raise Refused(f"The file {upload.name} is over the {limit:,}-byte limit; upload only the {what} itself.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(f"The file {upload.name} is not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x}); "
                          "save it as UTF-8 and upload it again.") from None
        return text.removeprefix("\ufeff")
    size = len(pasted.encode("utf-8", errors="surrogatepass"))
    if size > limit:
        raise Refused(f"The pasted {what} is {size:,} bytes, over the {limit:,}-byte limit.", source=pasted)
    if not pasted.strip():
        raise Refused(f"Nothing was uploaded: choose a file or paste the {what} into the editor.")
    # Browsers send a textarea's lines ended with CRLF: the module is stored as it was written (and its hash matches
    # the file's), with plain newlines.
    return pasted.replace("\r\n", "\n")


def problem_name(name: str) -> str:
    """What a problem is called: the name given or the file's, without its ".py" (a problem is not a file)."""
    return (name or "").strip().removesuffix(".py").strip()[:200] or "problem"


@dataclass
class CheckedProblem:
    """A module that passed every check and is not stored yet (check_problem, then store_problem)."""

    name: str
    source: str
    names: ProblemNames
    validation: dict[str, Any]


def check_problem(name: str, source: str, *, names: ProblemNames | None = None, in_process: bool = False) -> CheckedProblem:
    """Parse the module, then run it once in a worker's sandbox; writes nothing. The check waits up to
    KSTUDIO_PROBLEM_CHECK_SECONDS (and more for the worker): call it outside any transaction, so no write lock or
    row lock is held meanwhile (a SQLite write lock would stop every other user's writes)."""
    names = names or ProblemNames()
    report = validation.validate_problem(source, filename=name or "problem.py", names=names)
    if not report.ok:
        raise Refused(f"The module is not a valid problem: {first_error(report.errors())}", report.errors(),
                      source)
    # Inputs that cannot fit are refused at once, before the sandbox spends a minute finding out.
    footprint, limit = footprint_of(source, names), memory_limit()
    if footprint is not None and footprint > limit:
        raise Refused(too_big(footprint, limit), source=source)
    header = check_in_sandbox(source, names, in_process=in_process)
    return CheckedProblem(name=problem_name(name), source=source, names=names, validation={
        **report.to_dict(), "run": {k: header.get(k) for k in ("outputs", "returns_sequence", "work", "toolchain",
                                                               "hardware")}})


def store_problem(owner: AbstractBaseUser, checked: CheckedProblem, *, shared: bool = False,
                  origin: str = Origin.UPLOADED) -> Problem:
    names = checked.names
    return Problem.objects.create(
        owner=owner, name=checked.name, source=checked.source, source_hash=sha256(checked.source),
        model_name=names.model, get_inputs_name=names.get_inputs, get_init_inputs_name=names.get_init_inputs,
        validation=checked.validation, shared=shared, origin=origin)


def create_problem(owner: AbstractBaseUser, name: str, source: str, *, names: ProblemNames | None = None,
                   shared: bool = False, origin: str = Origin.UPLOADED, in_process: bool = False) -> Problem:
    return store_problem(owner, check_problem(name, source, names=names, in_process=in_process), shared=shared,
                         origin=origin)


def check_in_sandbox(source: str, names: ProblemNames, *, in_process: bool = False) -> dict[str, Any]:
    """Import and run the module once in a worker's sandbox (the `build` queue) and wait for the answer;
    the web process never imports it. Returns what the run learnt; raises Refused otherwise.
    `in_process`: run the check's task in this process (its own sandbox) instead: for a command that has no
    worker to ask (the embedded default's broker lives inside `serve`, which a management command is not)."""
    seconds = settings.KSTUDIO_PROBLEM_CHECK_SECONDS
    wait = seconds + _CHECK_GRACE_SECONDS
    arguments = (source, [names.model, names.get_inputs, names.get_init_inputs], seconds)
    try:
        if in_process:
            result = check_task.apply(arguments).get()
        else:
            pending = check_task.apply_async(arguments, queue="build", expires=wait)
            result = pending.get(timeout=wait, disable_sync_subtasks=False)
    except OperationalError as exc:
        raise Refused(f"The problem could not be checked: the task queue is unreachable ({exc}). Nothing was "
                      "created; try again once the studio's workers are running.", source=source) from None
    except NoAnswer:
        raise Refused(f"The problem could not be checked: no worker answered within {wait} s. Nothing was "
                      "created; make sure a worker serves the `build` queue and try again.", source=source) from None
    if result.get("internal"):
        raise Refused(f"Checking the problem failed inside the studio ({result['error']}); nothing was created. "
                      "Try again, and tell an admin if it keeps happening.", source=source)
    if not result["ok"] and isinstance(result.get("too_big"), dict):
        big = result["too_big"]
        raise Refused(too_big_traced(str(big["footprint"]), int(big["needed"]), int(big["limit"])), source=source)
    if not result["ok"] and ran_out_of_memory(result["error"]):
        raise Refused(too_big(footprint_of(source, names), memory_limit()), source=source)
    if not result["ok"]:
        raise Refused(f"The module was run once in the sandbox and failed, so nothing was created: "
                      f"{result['error']}\nFix the module (it must import and run `{names.model}` on "
                      f"`{names.get_inputs}()` within {seconds} s) and upload it again.", source=source)
    return result["header"]


def delete_problem(problem: Problem) -> None:
    """Delete a problem with its owner's runs and kernels on it. Other users' work on a shared problem is never
    deleted: while any exists the deletion is refused, naming how much (README, Security). So is a problem in a
    batch, whose report would lose its row."""
    with transaction.atomic():
        runs = problem.runs.exclude(owner=problem.owner_id).count()
        kernels = problem.kernels.exclude(owner=problem.owner_id).count()
        if runs or kernels:
            raise InUse(f"Other users have {runs} run(s) and {kernels} kernel(s) on this shared problem, so it "
                          "stays; their work is theirs. Nothing was deleted.")
        if problem.batch_items.exists():
            raise InUse("It is part of a batch, whose report needs it; delete the batch first. Nothing was deleted.")
        # Kernels keep their candidate (PROTECT), so they go first; then the runs (RESTRICT on the problem).
        problem.kernels.all().delete()
        problem.runs.all().delete()
        problem.delete()

