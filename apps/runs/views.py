import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.core.errors import Refused, shows_refusals
from apps.problems.forms import AgentRunForm, CandidateForm
from apps.problems.models import Problem
from apps.problems.services import read_source
from apps.problems.views import problem_context
from apps.runs import presentation
from apps.runs.events import event_page
from apps.runs.models import Candidate, Run
from apps.runs.selectors import visible_runs
from apps.runs.services import cancel_run, start_agent_run, start_evaluation, start_profile


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = visible_runs(request.user)[:200]
    return render(request, "runs/list.html", {"runs": runs})


def _candidate_refused(request: HttpRequest, refusal: Refused, problem_pk: int) -> HttpResponse:
    """The problem's page with the candidate form's error, markers and source (400, or 429 when a quota refused)."""
    return _problem_page_with_error(request, problem_pk, refusal.status, form=CandidateForm(request.POST, request.FILES),
                                    error=refusal.message, issues=refusal.issue_dicts(),
                                    source=refusal.source or request.POST.get("source", ""))


def _agent_run_refused(request: HttpRequest, refusal: Refused, problem_pk: int) -> HttpResponse:
    return _problem_page_with_error(request, problem_pk, refusal.status, agent_form=AgentRunForm(request.POST),
                                    agent_error=refusal.message)


@login_required
@require_POST
@shows_refusals(_candidate_refused)
def run_start(request: HttpRequest, problem_pk: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=problem_pk)
    form = CandidateForm(request.POST, request.FILES)
    if not form.is_valid():
        return _problem_page_with_error(request, problem_pk, 400, form=form, error=_form_errors(form), issues=[],
                                        source=request.POST.get("source", ""))
    source = read_source(form.cleaned_data["file"], form.cleaned_data["source"], what="candidate module")
    run = start_evaluation(request.user, problem, source, backend=form.cleaned_data["backend"] or None,
                           shared=form.cleaned_data["shared"])
    return redirect(run)


@login_required
@require_POST
@shows_refusals(_agent_run_refused)
def run_start_agent(request: HttpRequest, problem_pk: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=problem_pk)
    form = AgentRunForm(request.POST)
    if not form.is_valid():
        return _problem_page_with_error(request, problem_pk, 400, agent_form=form, agent_error=_form_errors(form))
    data = form.cleaned_data
    run = start_agent_run(request.user, problem, data["endpoint"],
                          budgets={k: data[k] for k in ("turns", "tokens", "agent_wall_seconds")},
                          instructions=data["instructions"], shared=data["shared"], device=data["device"])
    return redirect(run)


def _form_errors(form: object) -> str:
    return "The form is incomplete: " + "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())


def _problem_page_with_error(request: HttpRequest, problem_pk: int, status: int, **context: object) -> HttpResponse:
    """The problem's page with the form's error: 400, or 429 when a quota refused the run."""
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=problem_pk)
    return render(request, "problems/detail.html", {**problem_context(request, problem), **context}, status=status)


# Endpoint kinds where a language model writes the turns (builtin and scripted policies spend no tokens).
MODEL_KINDS = ("openai", "transformers")


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem", "owner"), pk=pk)
    candidates = list(run.candidates.order_by("turn"))
    candidate = candidates[-1] if candidates else None
    # The panels start from the best candidate (else the latest); run.js replaces them as verdicts stream in.
    shown = run.best_candidate or candidate
    verdict = shown.stored_verdict if shown else None
    return render(request, "runs/detail.html", {
        "run": run, "candidate": candidate, "candidates": candidates, "is_agent": run.kind == Run.Kind.AGENT,
        "model_spoke": run.config.get("policy", "").partition(":")[0] in MODEL_KINDS,
        "best": run.best_candidate, "can_cancel": run.owner_id == request.user.pk or request.user.is_staff,
        "shown": shown, "panel": presentation.verdict_panel(verdict),
        "profile": presentation.profile_panel(_latest_profile(candidates)),
        "roofline": presentation.roofline(run.problem.validation, verdict), "flag_words": presentation.FLAG_WORDS})


def _latest_profile(candidates: list[Candidate]) -> dict[str, object] | None:
    return next((c.stored_verdict.profile for c in reversed(candidates) if c.verdict and c.stored_verdict.profile), None)


@login_required
def candidate_detail(request: HttpRequest, pk: int, turn: int) -> HttpResponse:
    return _candidate_page(request, pk, turn)


def _candidate_page(request: HttpRequest, pk: int, turn: int, status: int = 200, **extra: Any) -> HttpResponse:
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem"), pk=pk)
    candidate = get_object_or_404(run.candidates, turn=turn)
    verdict = candidate.stored_verdict
    build = candidate.build or (verdict.build if verdict else None)
    return render(request, "runs/candidate.html", {
        "run": run, "candidate": candidate, "turns": list(run.candidates.values_list("turn", flat=True)),
        "markers": presentation.build_markers(build, candidate.source), "build_log": (build or {}).get("log", ""),
        "panel": presentation.verdict_panel(verdict), "profile": presentation.profile_panel(verdict and verdict.profile),
        "roofline": presentation.roofline(run.problem.validation, verdict), **extra}, status=status)


def _profile_refused(request: HttpRequest, refusal: Refused, pk: int, turn: int) -> HttpResponse:
    return _candidate_page(request, pk, turn, refusal.status, profile_error=refusal.message)


@login_required
@require_POST
@shows_refusals(_profile_refused)
def candidate_profile(request: HttpRequest, pk: int, turn: int) -> HttpResponse:
    """"Profile this candidate": a new evaluation of it with the profiler on, in a run of the user's own."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("problem"), pk=pk)
    return redirect(start_profile(request.user, get_object_or_404(run.candidates, turn=turn)))


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
        # ASCII digits only: str.isdigit() also passes "²", which int() refuses.
        if not re.fullmatch(r"[0-9]{1,9}", which) or int(which) not in turns:
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
    return JsonResponse({"run": run.pk, "status": run.status, "events": event_page(run.pk, after).events})
