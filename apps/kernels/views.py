from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from agent.knowledge import best_of_speedup
from apps.core.errors import Refused, shows_refusals
from apps.kernels.models import Kernel
from apps.kernels.services import download_name, hardware_label, is_noisy, leaderboard, render_module, render_package
from apps.problems.models import Problem
from apps.runs import presentation
from apps.runs.models import Run
from apps.runs.services import start_rebenchmark
from apps.runs.stored_verdict import StoredVerdict


@login_required
def kernel_list(request: HttpRequest) -> HttpResponse:
    kernels = list(Kernel.objects.visible_to(request.user).select_related("problem", "owner"))
    for k in kernels:
        k.hardware_label = hardware_label(k)
    return render(request, "kernels/list.html", {
        "kernels": kernels, "backends": sorted({k.backend for k in kernels if k.backend}),
        "hardware": sorted({k.hardware_label for k in kernels})})


@login_required
def problem_leaderboard(request: HttpRequest, problem_pk: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=problem_pk)
    kernels = list(Kernel.objects.visible_to(request.user).filter(problem=problem).select_related("owner", "produced_by"))
    for k in kernels:
        k.noisy = is_noisy(k)
    return render(request, "kernels/leaderboard.html", {"problem": problem, "groups": leaderboard(kernels)})


@login_required
def kernel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The provenance page: who and what produced it, the trajectory, toolchain, hardware, the evidence."""
    return _detail_page(request, pk)


def _detail_page(request: HttpRequest, pk: int, status: int = 200, **extra: Any) -> HttpResponse:
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "owner", "candidate__run"), pk=pk)
    # The evidence as the library kept it, over the candidate's whole verdict (its profile, stdout, ...).
    verdict = StoredVerdict({**(kernel.candidate.verdict or {}), **kernel.verification, "timing": kernel.timing or None,
                             "hardware": kernel.hardware})
    return render(request, "kernels/detail.html", {
        "kernel": kernel, "run_visible": Run.objects.visible_to(request.user).filter(pk=kernel.candidate.run_id).exists(),
        "panel": presentation.verdict_panel(verdict), "profile": presentation.profile_panel(verdict.profile),
        "roofline": presentation.roofline(kernel.problem.validation, verdict), "hardware_label": hardware_label(kernel),
        "measurements": _measurement_rows(kernel), "can_rebenchmark": kernel.owner_id == request.user.pk,
        "conversation": [e for e in kernel.trajectory if e.get("kind") in ("assistant", "tool_result", "verification", "timing", "build")],
        **extra}, status=status)


def _measurement_rows(kernel: Kernel) -> list[dict[str, Any]]:
    """Every measurement of the kernel, oldest first, with its best-of speedup (what the leaderboard ranks by)."""
    rows = []
    for number, m in enumerate(kernel.measurements, 1):
        timing = m.get("timing") or {}
        rows.append({**m, "number": number, "timing": timing, "when": str(m.get("at") or "")[:16].replace("T", " "),
                     "best_of": best_of_speedup(timing.get("speedup_vs_eager"), timing.get("speedup_vs_compile"))})
    return rows


def _rebenchmark_refused(request: HttpRequest, refusal: Refused, pk: int) -> HttpResponse:
    return _detail_page(request, pk, refusal.status, rebenchmark_error=refusal.message)


@login_required
@require_POST
@shows_refusals(_rebenchmark_refused)
def kernel_rebenchmark(request: HttpRequest, pk: int) -> HttpResponse:
    """Measure the kernel again (its owner's action): a new evaluation run, whose timing joins its measurements."""
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem"), pk=pk)
    return redirect(start_rebenchmark(request.user, kernel))


@login_required
def kernel_diff(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "candidate__run"), pk=pk)
    return render(request, "diff.html", {"kernel": kernel, "run": kernel.candidate.run,
                                         "left": (f"the reference module {kernel.problem.name}", kernel.problem.source),
                                         "right": (f"kernel {kernel.name}", kernel.source)})


@login_required
def kernel_download(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "produced_by"), pk=pk)
    response = HttpResponse(render_module(kernel), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{download_name(kernel)}"'
    return response


@login_required
def kernel_package(request: HttpRequest, pk: int) -> HttpResponse:
    """A pip-installable zip that registers the kernel as a torch.library custom op."""
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "produced_by"), pk=pk)
    name, data = render_package(kernel, request.build_absolute_uri(kernel.get_absolute_url()))
    response = HttpResponse(data, content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
