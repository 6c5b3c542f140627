from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.problems.forms import AgentRunForm, CandidateForm
from apps.problems.models import Problem
from apps.problems.services import UploadRejected, read_source
from apps.runs import presentation
from apps.runs.models import Candidate, Run
from apps.runs.services import cancel_run, events_after, start_agent_run, start_evaluation


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
        error = _form_errors(form)
    return _problem_page_with_error(request, problem, form=form, error=error, issues=issues, source=source)


@login_required
@require_POST
def run_start_agent(request: HttpRequest, problem_pk: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=problem_pk)
    form = AgentRunForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            run = start_agent_run(request.user, problem, data["endpoint"],
                                  {k: data[k] for k in ("turns", "tokens", "agent_wall_seconds")},
                                  instructions=data["instructions"], shared=data["shared"])
        except UploadRejected as exc:
            error = exc.message
        else:
            return redirect(run)
    else:
        error = _form_errors(form)
    return _problem_page_with_error(request, problem, agent_form=form, agent_error=error)


def _form_errors(form: object) -> str:
    return "The form is incomplete: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())


def _problem_page_with_error(request: HttpRequest, problem: Problem, **context: object) -> HttpResponse:
    from apps.problems.views import problem_context

    return render(request, "problems/detail.html", {**problem_context(request, problem), **context}, status=400)


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem", "owner"), pk=pk)
    candidates = list(run.candidates.order_by("turn"))
    candidate = candidates[-1] if candidates else None
    # The panels start from the best candidate (else the latest); run.js replaces them as verdicts stream in.
    shown = run.best_candidate or candidate
    verdict = shown.verdict if shown else None
    return render(request, "runs/detail.html", {
        "run": run, "candidate": candidate, "candidates": candidates, "is_agent": run.kind == Run.Kind.AGENT,
        "best": run.best_candidate, "can_cancel": run.owner_id == request.user.pk or request.user.is_staff,
        "shown": shown, "panel": presentation.verdict_panel(verdict),
        "profile": presentation.profile_panel(_latest_profile(candidates)),
        "roofline": presentation.roofline(run.problem.validation, verdict), "flag_words": presentation.FLAG_WORDS})


def _latest_profile(candidates: list[Candidate]) -> dict[str, object] | None:
    return next(((c.verdict or {}).get("profile") for c in reversed(candidates) if (c.verdict or {}).get("profile")), None)


@login_required
def candidate_detail(request: HttpRequest, pk: int, turn: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem"), pk=pk)
    candidate = get_object_or_404(run.candidates, turn=turn)
    verdict = candidate.verdict or {}
    build = candidate.build or verdict.get("build")
    return render(request, "runs/candidate.html", {
        "run": run, "candidate": candidate, "turns": list(run.candidates.values_list("turn", flat=True)),
        "markers": presentation.build_markers(build, candidate.source), "build_log": (build or {}).get("log", ""),
        "panel": presentation.verdict_panel(verdict or None), "profile": presentation.profile_panel(verdict.get("profile")),
        "roofline": presentation.roofline(run.problem.validation, verdict or None)})


@login_required
def run_diff(request: HttpRequest, pk: int) -> HttpResponse:
    """Two sources of a run side by side: any two candidates, or the reference module and a candidate
    (?a=reference|<turn>&b=<turn>; by default the reference against the latest candidate)."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem"), pk=pk)
    turns = list(run.candidates.values_list("turn", flat=True))
    if not turns:
        return render(request, "diff.html", {"run": run, "error": "This run has no candidate yet: nothing to compare."},
                      status=404)
    a, b = request.GET.get("a", "reference"), request.GET.get("b", str(turns[-1]))
    sides = []
    for which in (a, b):
        if which == "reference":
            sides.append(("the reference module " + run.problem.name, run.problem.source))
            continue
        if not which.isdigit() or int(which) not in turns:
            return render(request, "diff.html", {"run": run, "turns": turns, "a": a, "b": b,
                                                 "error": f"No candidate {which!r} in run #{run.pk}: choose 'reference' or one of "
                                                          f"the turns {', '.join(map(str, turns))}."}, status=400)
        c = run.candidates.get(turn=int(which))
        sides.append((f"candidate {c.turn} ({c.status})", c.source))
    return render(request, "diff.html", {"run": run, "turns": turns, "a": a, "b": b, "left": sides[0], "right": sides[1],
                                         "back": run.get_absolute_url()})


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
