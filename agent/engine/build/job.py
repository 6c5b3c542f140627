"""The build's sandboxed jobs. Neither writes the shared cache (it is read-only to every job); the trusted
parent installs what `compile_inline` leaves in its private directory (Evaluator.build, BuildCache.install).

- `discover` imports the candidate (candidate code runs there: hostile) with its compile calls routed to the
  read-only cache. A request that is cached is served (and loaded where the job can load it); one that is not
  is NOT compiled there: the request itself is reported, as data, and the import gets a stand-in.
- `compile_inline` runs our code only: it compiles one request, given by the parent as data, into the job's
  private directory ($KSTUDIO_PRIVATE_DIR). One request per job, so that one request's compile (whose flags
  are the candidate's) can never touch another request's output; the parent keys what it installs by the
  request it sent, so an entry always holds what its own request compiles to.
"""
from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any, BinaryIO

from agent.engine.build.cache import BuildCache
from agent.engine.build.inline import ExtensionBuildError, compile_extension
from agent.engine.build.spec import InlineExtension
from agent.engine.build.toolchain import detect_toolchain


def discover(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    from agent.engine.evaluate.codec import write_result
    from agent.engine.evaluate.loader import ExtensionRouter, cache_root_from, exec_module

    toolchain = detect_toolchain(payload.get("cuda_arch"))
    router = ExtensionRouter(toolchain, BuildCache(cache_root_from(payload.get("cache_root"))),
                             loadable=bool(payload.get("loadable", False)), defer_misses=True)
    router.install()
    header: dict[str, Any] = {"ok": True, "import_error": None}
    started = time.monotonic()
    try:
        exec_module(payload["candidate_source"], "kstudio_candidate", "candidate.py")
    except ExtensionBuildError as exc:
        header.update(ok=False, error=str(exc), log=exc.log)
    except BaseException as exc:  # noqa: BLE001 - the candidate's import failing is a finding
        header["import_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    header.update(seconds=time.monotonic() - started, records=router.report(), toolchain=router.toolchain.to_dict())
    write_result(result, header)


def compile_inline(payload: dict[str, Any], result: BinaryIO, context: dict[str, Any]) -> None:
    from agent.engine.evaluate.codec import write_result

    ext = InlineExtension.from_dict(payload["spec"])
    toolchain = detect_toolchain(payload.get("cuda_arch"))
    out = Path(os.environ["KSTUDIO_PRIVATE_DIR"])
    started = time.monotonic()
    try:
        header: dict[str, Any] = {"ok": True, "built": compile_extension(ext, toolchain, out)}
    except ExtensionBuildError as exc:
        header = {"ok": False, "error": str(exc), "log": exc.log}
    header["seconds"] = time.monotonic() - started
    write_result(result, header)
