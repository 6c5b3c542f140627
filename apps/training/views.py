"""The training pages (staff with the admin's training-run permissions): a run's progress with its charts, the
JSON it polls, and cancel."""
from __future__ import annotations

import yaml
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.training import services
from apps.training.permissions import can_cancel, can_view, requires
from apps.training.models import TrainingRun


@requires(can_view)
def run_list(request: HttpRequest) -> HttpResponse:
    runs = TrainingRun.objects.select_related("owner", "endpoint")[:200]
    return render(request, "training/list.html", {"runs": runs})


@requires(can_view)
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(TrainingRun.objects.select_related("owner", "endpoint"), pk=pk)
    return render(request, "training/detail.html", {
        "run": run, "can_cancel": can_cancel(request.user), "config_text": yaml.safe_dump(run.config, sort_keys=False),
        "filters_text": yaml.safe_dump({"data filters": run.data_filters}, sort_keys=False)})


@requires(can_view)
def run_status(request: HttpRequest, pk: int) -> JsonResponse:
    run = get_object_or_404(TrainingRun.objects.select_related("endpoint"), pk=pk)
    try:
        after = int(request.GET.get("after", "0"))
    except ValueError:
        return JsonResponse({"error": "after must be a metrics row id (a whole number)"}, status=400)
    return JsonResponse(services.status_payload(run, after))


@requires(can_cancel)
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(TrainingRun, pk=pk)
    if services.cancel(run):
        messages.success(request, "Asked the run to stop.")
    else:
        messages.warning(request, f"The run is already {run.status}; nothing to stop.")
    return redirect(run)
