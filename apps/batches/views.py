"""The batch pages: every batch the user may see, and one batch's progress per problem and its report."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render

from apps.batches import services
from apps.batches.selectors import visible_batches


@login_required
def batch_list(request: HttpRequest) -> HttpResponse:
    batches = list(visible_batches(request.user))
    for batch in batches:
        batch.progress = services.progress(batch)
    return render(request, "batches/list.html", {"batches": batches})


@login_required
def batch_detail(request: HttpRequest, pk: int) -> HttpResponse:
    batch = get_object_or_404(visible_batches(request.user), pk=pk)
    table = services.rows(batch)
    stages = services.stages(batch)
    return render(request, "batches/detail.html", {
        "batch": batch, "progress": services.progress(batch), "rows": [(r, stages[r.position]) for r in table],
        "summary": services.summarize(table), "configuration": services.configuration(batch)})
