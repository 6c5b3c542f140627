from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from apps.kernels.models import Kernel
from apps.kernels.services import download_name, hardware_label, leaderboard, render_module, render_package
from apps.problems.models import Problem
from apps.runs import presentation
from apps.runs.models import Run


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
    kernels = Kernel.objects.visible_to(request.user).filter(problem=problem).select_related("owner", "produced_by")
    return render(request, "kernels/leaderboard.html", {"problem": problem, "groups": leaderboard(kernels)})


@login_required
def kernel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The provenance page: who and what produced it, the trajectory, toolchain, hardware, the evidence."""
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "owner", "candidate__run"), pk=pk)
    verdict = {**(kernel.candidate.verdict or {}), **kernel.verification, "timing": kernel.timing or None,
               "hardware": kernel.hardware}
    return render(request, "kernels/detail.html", {
        "kernel": kernel, "run_visible": Run.objects.visible_to(request.user).filter(pk=kernel.candidate.run_id).exists(),
        "panel": presentation.verdict_panel(verdict), "profile": presentation.profile_panel((kernel.candidate.verdict or {}).get("profile")),
        "roofline": presentation.roofline(kernel.problem.validation, verdict), "hardware_label": hardware_label(kernel),
        "conversation": [e for e in kernel.trajectory if e.get("kind") in ("assistant", "tool_result", "verification", "timing", "build")]})


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
