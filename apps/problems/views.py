import json
from dataclasses import asdict

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from agent.engine import ProblemNames, validate_candidate, validate_problem
from agent.engine.validation import MAX_SOURCE_BYTES
from apps.problems.forms import AgentRunForm, CandidateForm, ProblemForm
from apps.problems.models import Problem
from apps.core.errors import Refused, shows_refusals
from apps.problems.selectors import visible_problems
from apps.problems.services import create_problem, read_source


@login_required
def problem_list(request: HttpRequest) -> HttpResponse:
    problems = visible_problems(request.user)
    return render(request, "problems/list.html", {"problems": problems})


def _upload_refused(request: HttpRequest, refusal: Refused) -> HttpResponse:
    """The upload page again, with what was wrong, the editor's markers and what the user sent."""
    context = {"form": ProblemForm(request.POST, request.FILES), "error": refusal.message,
               "issues": refusal.issue_dicts(), "source": refusal.source}
    return render(request, "problems/new.html", context, status=refusal.status)


@login_required
@shows_refusals(_upload_refused)
def problem_new(request: HttpRequest) -> HttpResponse:
    form = ProblemForm(request.POST or None, request.FILES or None)
    context: dict[str, object] = {"form": form, "issues": [], "error": "", "source": ""}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        upload = data["file"]
        try:
            source = read_source(upload, data["source"], what="problem module")
            context["source"] = source
            names = ProblemNames(data["model_name"].strip(), data["get_inputs_name"].strip(),
                                 data["get_init_inputs_name"].strip())
            problem = create_problem(request.user, data["name"] or (upload.name if upload else "problem.py"), source,
                                     names=names, shared=data["shared"])
        except ValueError as exc:  # ProblemNames: a name that is not an identifier
            context["error"] = str(exc)
        else:
            return redirect(problem)
        return render(request, "problems/new.html", context, status=400)
    if request.method == "POST":  # an invalid form (e.g. a NUL character in the text): say which field and why
        context.update(source=request.POST.get("source", ""), error="The form is incomplete: " + "; ".join(
            f"{name}: {' '.join(errors)}" for name, errors in form.errors.items()))
        return render(request, "problems/new.html", context, status=400)
    return render(request, "problems/new.html", context)


@login_required
def problem_detail(request: HttpRequest, pk: int) -> HttpResponse:
    problem = get_object_or_404(Problem.objects.visible_to(request.user), pk=pk)
    return render(request, "problems/detail.html", problem_context(request, problem))


def problem_context(request: HttpRequest, problem: Problem) -> dict[str, object]:
    """What the problem page shows; the run views re-render it with a form's errors."""
    return {"problem": problem, "runs": problem.runs.visible_to(request.user).order_by("-created_at")[:50],
            "kernels": problem.kernels.visible_to(request.user), "form": CandidateForm(), "agent_form": AgentRunForm(),
            "issues": [],  # the candidate editor's markers: a list even when there are none (editor.js reads it)
            "can_run": request.user.is_staff or problem.owner_id == request.user.pk or problem.shared}


@login_required
@require_POST
def problem_validate(request: HttpRequest) -> JsonResponse:
    """The editor's check as you type: the static validation of a problem, or of a candidate for a problem you can
    see, as {"ok", "issues": [{severity, message, line, col}]}. AST only, as on upload: nothing is run or imported."""
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, RecursionError):
        return JsonResponse({"error": "Send a JSON object: {\"source\": ..., \"kind\": \"problem\" or \"candidate\"}."},
                            status=400)
    body = body if isinstance(body, dict) else {}
    source, kind = body.get("source"), body.get("kind")
    if not isinstance(source, str) or kind not in ("problem", "candidate"):
        return JsonResponse({"error": "Send {\"source\": text, \"kind\": \"problem\" or \"candidate\"} (and \"problem\": "
                                      "its id for a candidate)."}, status=400)
    if len(source.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
        return JsonResponse({"ok": False, "issues": [{"severity": "error", "line": None, "col": None,
                                                      "message": f"The module is over {MAX_SOURCE_BYTES} bytes; upload a smaller one."}]})
    if kind == "problem":
        given = body.get("names") if isinstance(body.get("names"), dict) else {}
        try:
            names = ProblemNames(**{k: v for k, v in given.items() if k in ("model", "get_inputs", "get_init_inputs")
                                    and isinstance(v, str) and v})
        except ValueError as exc:
            return JsonResponse({"ok": False, "issues": [{"severity": "error", "line": None, "col": None, "message": str(exc)}]})
        report = validate_problem(source, names=names)
    else:
        problem_id = body.get("problem")
        if not isinstance(problem_id, int) or isinstance(problem_id, bool):
            return JsonResponse({"error": "A candidate is checked against its problem: send \"problem\": its id."}, status=400)
        problem = get_object_or_404(visible_problems(request.user), pk=problem_id)
        report = validate_candidate(source, problem_source=problem.source, problem_names=problem.names)
    return JsonResponse({"ok": report.ok, "issues": [asdict(i) for i in report.issues]})
