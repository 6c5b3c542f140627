from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from apps.kernels.models import Kernel
from apps.kernels.services import download_name, render_module


@login_required
def kernel_list(request: HttpRequest) -> HttpResponse:
    kernels = Kernel.objects.visible_to(request.user).select_related("problem", "owner")
    return render(request, "kernels/list.html", {"kernels": kernels})


@login_required
def kernel_detail(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "owner", "candidate__run"), pk=pk)
    return render(request, "kernels/detail.html", {"kernel": kernel})


@login_required
def kernel_download(request: HttpRequest, pk: int) -> HttpResponse:
    kernel = get_object_or_404(Kernel.objects.visible_to(request.user).select_related("problem", "produced_by"), pk=pk)
    response = HttpResponse(render_module(kernel), content_type="text/x-python; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{download_name(kernel)}"'
    return response
