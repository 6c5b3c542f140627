"""Training runs in the Django admin: "Add" is the launch form (apps/training/forms.py); a run's own page
(/training/<id>/) shows its progress; the list can cancel runs."""
from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.utils.html import format_html

from apps.training import services
from apps.training.forms import LaunchForm
from apps.training.models import TrainingRun
from apps.training.permissions import can_cancel


@admin.register(TrainingRun)
class TrainingRunAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "status", "stage_list", "owner", "endpoint", "created_at", "finished_at", "page")
    list_filter = ("status",)
    search_fields = ("name", "owner__username")
    actions = ["cancel_runs"]
    readonly_fields = ("name", "owner", "status", "config", "data_filters", "num_processes", "output_dir",
                       "data_summary", "log_tail", "error", "result", "endpoint", "celery_task_id", "worker_host", "pid",
                       "created_at", "started_at", "finished_at")

    @admin.display(description="stages")
    def stage_list(self, run: TrainingRun) -> str:
        return " → ".join(run.stages)

    @admin.display(description="progress")
    def page(self, run: TrainingRun) -> str:
        return format_html('<a href="{}">charts and log</a>', run.get_absolute_url())

    @admin.action(description="Cancel the selected training runs", permissions=["cancel"])
    def cancel_runs(self, request: HttpRequest, queryset: QuerySet[TrainingRun]) -> None:
        stopped = sum(services.cancel(run) for run in queryset)
        self.message_user(request, f"Asked {stopped} run(s) to stop; runs already over were left as they were.",
                          messages.SUCCESS if stopped else messages.WARNING)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return can_cancel(request.user)  # the same rule as the run's page (apps/training/permissions.py)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # a run is launched and cancelled, never edited (the list still shows it read-only)

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None) -> HttpResponse:
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = LaunchForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            run = services.launch(request.user, data["pipeline"], data["filters"], num_processes=data["num_processes"],
                                  name=data["name"].strip())
            self.message_user(request, f"Launched {run}: queued for a train worker.", messages.SUCCESS)
            return redirect(run)
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "form": form,
                   "title": "Launch a training run", "has_view_permission": self.has_view_permission(request),
                   **(extra_context or {})}
        return TemplateResponse(request, "admin/training/launch.html", context)
