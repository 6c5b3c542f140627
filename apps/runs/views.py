from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.problems.forms import CandidateForm
from apps.problems.models import Problem
from apps.problems.services import UploadRejected, read_source
from apps.runs.models import Run
from apps.runs.services import cancel_run, events_after, start_evaluation


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.visible_to(request.user).select_related("problem", "owner")[:200]
    return render(request, "runs/list.html", {"runs": runs})


@login_required
@require_POST
def run_start(request: HttpRequest, problem_pk: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=problem_pk)
    form = CandidateForm(request.POST, request.FILES)
    error, issues, source = "", [], request.POST.get("source", "")
    if form.is_valid():
        try:
            source = read_source(form.cleaned_data["file"], form.cleaned_data["source"], "candidate module")
            run = start_evaluation(request.user, problem, source, form.cleaned_data["backend"] or None,
                                   shared=form.cleaned_data["shared"])
        except UploadRejected as exc:
            error, issues, source = exc.message, exc.issue_dicts(), exc.source or source
        else:
            return redirect(run)
    else:
        error = "The form is incomplete: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
    return render(request, "problems/detail.html", {
        "problem": problem, "runs": problem.runs.visible_to(request.user)[:50], "kernels": problem.kernels.visible_to(request.user),
        "form": form, "can_run": True, "error": error, "issues": issues, "source": source}, status=400)


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem", "owner"), pk=pk)
    candidate = run.candidates.order_by("-turn").first()
    return render(request, "runs/detail.html", {"run": run, "candidate": candidate,
                                                "can_cancel": run.owner_id == request.user.pk or request.user.is_staff})


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.owned_by(request.user), pk=pk)
    cancel_run(run)
    return redirect(run)


@login_required
def run_events(request: HttpRequest, pk: int) -> JsonResponse:
    """The same events as the websocket, for scripts and for browsers without websockets."""
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=pk)
    try:
        after = max(0, int(request.GET.get("after", "0")))
    except ValueError:
        after = 0
    return JsonResponse({"run": run.pk, "status": run.status, "events": events_after(run.pk, after)})
