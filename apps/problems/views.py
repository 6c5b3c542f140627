from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from agent.validation import ProblemNames
from apps.problems.forms import AgentRunForm, CandidateForm, ProblemForm
from apps.problems.models import Problem
from apps.problems.services import UploadRejected, create_problem, read_source


@login_required
def problem_list(request: HttpRequest) -> HttpResponse:
    problems = Problem.objects.visible_to(request.user).select_related("owner")
    return render(request, "problems/list.html", {"problems": problems})


@login_required
def problem_new(request: HttpRequest) -> HttpResponse:
    form = ProblemForm(request.POST or None, request.FILES or None)
    context: dict[str, object] = {"form": form, "issues": [], "error": "", "source": ""}
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        upload = data["file"]
        try:
            source = read_source(upload, data["source"], "problem module")
            context["source"] = source
            names = ProblemNames(data["model_name"].strip(), data["get_inputs_name"].strip(),
                                 data["get_init_inputs_name"].strip())
            problem = create_problem(request.user, data["name"] or (upload.name if upload else "problem.py"), source,
                                     names, shared=data["shared"])
        except ValueError as exc:  # ProblemNames: a name that is not an identifier
            context["error"] = str(exc)
        except UploadRejected as exc:
            context.update(error=exc.message, issues=exc.issue_dicts(), source=exc.source or context["source"])
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
            "can_run": request.user.is_staff or problem.owner_id == request.user.pk or problem.shared}
